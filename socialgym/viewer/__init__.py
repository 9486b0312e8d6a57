"""The run viewer: one self-contained HTML page that replays a run directory round by round.

    from socialgym.viewer import build_viewer
    build_viewer("runs/demo-1")          # writes runs/demo-1/viewer.html

For a feed run: the timeline of posts, comments and DMs per round, each agent's persona,
rewards, actions, votes, plans, coach tips and strongest ties with the updates that built them,
and the tie graph with a stable layout. For a moderation run (``discussions.jsonl``): the
threaded discussions per strategy with warnings, bans and the annotators' scores.
See docs/viewer.md.
"""

from socialgym.viewer.data import ViewerError, decode, likes_dislikes, load_run, tie_matrix
from socialgym.viewer.page import build_viewer, load, render

__all__ = ["build_viewer", "ViewerError", "load", "load_run", "render", "decode", "likes_dislikes",
           "tie_matrix"]
