"""Session-wide test settings."""

import os
import tempfile

# checkpoints are signed with a per-user key (socialgym/experiments/checkpoint.py): the tests use
# a key of their own, set before any test (or subprocess it starts) reads it, never the user's
os.environ.setdefault("SOCIALGYM_KEY_FILE", os.path.join(tempfile.mkdtemp(prefix="socialgym-key-"),
                                                         "checkpoint.key"))
