"""SocioDemographic Backgrounds (SDBs) of discussion participants (paper App. A.4.1, Table 3).

Every user, annotator and moderator gets an SDB rendered into its prompt; varied SDBs make
responses more varied (paper §3.3). The paper drew 30 user SDBs from GPT-4; here
``generate_sdbs`` draws them offline from templates with a seed, ``load_sdbs`` reads them
from JSON, and ``anonymised`` gives the no-SDB ablation (every value "unknown").
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from socialgym.platform.validation import is_int

UNKNOWN = "unknown"
USERNAME_RE = re.compile(r"^[A-Za-z0-9_\-]{1,32}$")  # usernames are used as @mentions
MIN_AGE, MAX_AGE = 13, 100

# Demographic string fields that must be non-empty.
_TEXT_FIELDS = ("sex", "education", "sexual_orientation", "demographic_group", "employment")


@dataclass(frozen=True)
class SDB:
    """One participant's background (Table 3). ``special_instructions`` carries the user's
    role (A.4.3); ``age`` may be "unknown" only in the anonymised ablation."""

    username: str
    age: int | str
    sex: str
    education: str
    sexual_orientation: str
    demographic_group: str
    employment: str
    special_instructions: str = ""
    personality: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.username, str) or not USERNAME_RE.match(self.username):
            raise ValueError(f"SDB username must be 1-32 letters, digits, '_' or '-' "
                             f"(it is used as an @mention), got {self.username!r}")
        if isinstance(self.age, str):
            if self.age != UNKNOWN:
                raise ValueError(f"SDB {self.username}: age must be an integer or {UNKNOWN!r}, "
                                 f"got {self.age!r}")
        elif isinstance(self.age, bool) or not isinstance(self.age, (int, np.integer)):
            raise ValueError(f"SDB {self.username}: age must be an integer, got {self.age!r}")
        elif not MIN_AGE <= self.age <= MAX_AGE:
            raise ValueError(f"SDB {self.username}: age must be in [{MIN_AGE}, {MAX_AGE}], "
                             f"got {self.age}")
        else:
            object.__setattr__(self, "age", int(self.age))  # numpy ints -> int
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"SDB {self.username}: {name} must be a non-empty string, "
                                 f"got {value!r}")
        if not isinstance(self.special_instructions, str):
            raise ValueError(f"SDB {self.username}: special_instructions must be a string, "
                             f"got {self.special_instructions!r}")
        if isinstance(self.personality, str) or not isinstance(self.personality, (tuple, list)):
            raise ValueError(f"SDB {self.username}: personality must be a list of strings, "
                             f"got {self.personality!r}")
        traits = tuple(self.personality)
        if any(not isinstance(t, str) or not t.strip() for t in traits):
            raise ValueError(f"SDB {self.username}: personality traits must be non-empty "
                             f"strings, got {list(traits)!r}")
        object.__setattr__(self, "personality", traits)  # lists (from JSON) -> tuple


# ---------------------------------------------------------------- templates

_SEXES = ("male", "female", "non-binary")
_SEX_P = (0.48, 0.48, 0.04)

_ORIENTATIONS = ("heterosexual", "homosexual", "bisexual", "pansexual", "asexual")
_ORIENTATION_P = (0.72, 0.10, 0.11, 0.04, 0.03)

_DEMOGRAPHIC_GROUPS = (
    "White", "Black", "Hispanic/Latino", "East Asian", "South Asian", "Southeast Asian",
    "Middle Eastern", "North African", "Sub-Saharan African", "Indigenous", "Pacific Islander",
    "Mixed race", "Eastern European", "Caribbean",
)

# (education level, minimum age)
_EDUCATION = (
    ("Some high school", 13), ("High school diploma", 18), ("Vocational training", 19),
    ("Some college", 19), ("Associate degree", 20), ("Bachelor's degree", 22),
    ("Master's degree", 24), ("Doctorate", 27),
)

# (employment, minimum age, maximum age)
_EMPLOYMENT = (
    ("Student", 13, 30), ("Unemployed", 18, 66), ("Retired", 58, 100),
    ("Part-time barista", 16, 40), ("Nurse", 22, 67), ("Software developer", 20, 67),
    ("High school teacher", 23, 67), ("Truck driver", 21, 70), ("Accountant", 22, 67),
    ("Electrician", 19, 67), ("Small business owner", 22, 80), ("Graphic designer", 20, 67),
    ("Warehouse worker", 18, 65), ("Social worker", 22, 67), ("Farmer", 16, 85),
    ("Civil engineer", 23, 67), ("Freelance writer", 18, 85), ("Stay-at-home parent", 18, 60),
    ("Police officer", 21, 60), ("Research scientist", 26, 70), ("Sales representative", 18, 67),
    ("Chef", 18, 70), ("Construction worker", 18, 65), ("Pharmacist", 25, 67),
)

# Personality profiles; each SDB takes 2-3 adjectives from one of them.
_PERSONALITIES = (
    ("analytical", "skeptical", "reserved", "detail-oriented"),
    ("outgoing", "enthusiastic", "talkative", "optimistic"),
    ("empathetic", "patient", "supportive", "diplomatic"),
    ("assertive", "competitive", "blunt", "confident"),
    ("anxious", "cautious", "sensitive", "introverted"),
    ("curious", "creative", "open-minded", "idealistic"),
    ("pragmatic", "disciplined", "traditional", "responsible"),
    ("sarcastic", "impulsive", "stubborn", "irritable"),
)

_NAME_ADJECTIVES = (
    "Quiet", "Dark", "Sunny", "Lucky", "Rusty", "Silent", "Wild", "Cosmic", "Brave", "Lazy",
    "Crimson", "Frosty", "Clever", "Grumpy", "Swift", "Mellow", "Electric", "Salty", "Golden",
    "Noisy",
)
_NAME_NOUNS = (
    "Otter", "Falcon", "Shadow", "Pixel", "Tiger", "Nomad", "Maple", "Raven", "Comet", "Badger",
    "Wolf", "Guru", "Panda", "Ranger", "Cactus", "Harbor", "Lynx", "Echo", "Voyager", "Sparrow",
)


def _choice(rng: np.random.Generator, options: Sequence, p: Sequence[float] | None = None):
    return options[int(rng.choice(len(options), p=p))]


_NAME_CAPACITY = len(_NAME_ADJECTIVES) * len(_NAME_NOUNS) * 990


def _draw_username(rng: np.random.Generator, taken: set[str]) -> str:
    while True:  # collisions are rare for forum-sized n and resolved by redrawing
        name = (_choice(rng, _NAME_ADJECTIVES) + _choice(rng, _NAME_NOUNS)
                + str(int(rng.integers(10, 1000))))
        if name not in taken:
            return name


def generate_sdbs(n: int, seed: int = 0, *, usernames: Sequence[str] | None = None) -> list[SDB]:
    """``n`` diverse SDBs drawn from templates, deterministic for ``seed``. Education and
    employment are drawn among values plausible for the drawn age. Handles are unique
    adjective+noun+digits unless ``usernames`` (``n`` distinct names, used in order) is given.
    Background draws do not depend on ``usernames``, and a smaller ``n`` gives a prefix."""
    if not is_int(n) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if usernames is None and n > _NAME_CAPACITY:
        raise ValueError(f"n={n} exceeds the {_NAME_CAPACITY} distinct generated handles; "
                         f"pass usernames")
    if usernames is not None:
        usernames = list(usernames)
        if len(usernames) != n:
            raise ValueError(f"usernames has {len(usernames)} names but n={n}")
        duplicates = sorted({u for u in usernames if usernames.count(u) > 1})
        if duplicates:
            raise ValueError(f"usernames must be unique; repeated: {duplicates}")
    rng = np.random.default_rng(seed)
    name_rng = np.random.default_rng([seed, 1])  # separate stream: names don't shift fields
    taken: set[str] = set()
    out: list[SDB] = []
    for i in range(int(n)):
        age = int(rng.integers(18, 81))
        education = _choice(rng, [e for e, lo in _EDUCATION if lo <= age])
        employment = _choice(rng, [e for e, lo, hi in _EMPLOYMENT if lo <= age <= hi])
        profile = _choice(rng, _PERSONALITIES)
        k = int(rng.integers(2, 4))
        traits = tuple(profile[j] for j in sorted(rng.choice(len(profile), size=k, replace=False)))
        fields_ = dict(
            age=age, sex=_choice(rng, _SEXES, _SEX_P), education=education,
            sexual_orientation=_choice(rng, _ORIENTATIONS, _ORIENTATION_P),
            demographic_group=_choice(rng, _DEMOGRAPHIC_GROUPS), employment=employment,
            personality=traits,
        )
        if usernames is None:
            name = _draw_username(name_rng, taken)
            taken.add(name)
        else:
            name = usernames[i]
        out.append(SDB(username=name, **fields_))
    return out


def anonymised(sdb: SDB, *, keep_special_instructions: bool = False) -> SDB:
    """The no-SDB ablation (A.4.1): every value but the username becomes "unknown".
    ``keep_special_instructions`` keeps the role text, should the SDB ablation be run apart
    from the paper's separate no-roles ablation (§5.2.2)."""
    role = sdb.special_instructions if keep_special_instructions else UNKNOWN
    return replace(sdb, age=UNKNOWN, sex=UNKNOWN, education=UNKNOWN,
                   sexual_orientation=UNKNOWN, demographic_group=UNKNOWN, employment=UNKNOWN,
                   special_instructions=role, personality=(UNKNOWN,))


def sdb_block(sdb: SDB, *, with_username: bool = True) -> str:
    """The multi-line rendering of ``sdb`` put into a prompt; annotators get
    ``with_username=False`` (the paper gives annotators no usernames, App. A.3.1)."""
    lines = [f"Username: {sdb.username}"] if with_username else []
    lines += [
        f"Age: {sdb.age}",
        f"Sex: {sdb.sex}",
        f"Education level: {sdb.education}",
        f"Sexual orientation: {sdb.sexual_orientation}",
        f"Demographic group: {sdb.demographic_group}",
        f"Current employment: {sdb.employment}",
        f"Special instructions: {sdb.special_instructions or 'none'}",
        f"Personality characteristics: {', '.join(sdb.personality) or 'none'}",
    ]
    return "\n".join(lines)


_FIELD_NAMES = tuple(f.name for f in fields(SDB))
_REQUIRED = ("username", "age") + _TEXT_FIELDS


def sdb_from_dict(data: dict, where: str = "SDB") -> SDB:
    """An SDB from a mapping with SDB's field names; unknown or missing keys -> ValueError."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELD_NAMES))
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; allowed: {list(_FIELD_NAMES)}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"{where} lacks required keys {missing}")
    return SDB(**data)


def load_sdbs(path: str | Path) -> list[SDB]:
    """SDBs from a JSON file holding a list of objects with SDB's field names; usernames must
    be unique."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of SDB objects, got {type(data).__name__}")
    sdbs = [sdb_from_dict(entry, f"{path}: entry {i}") for i, entry in enumerate(data)]
    names = [s.username for s in sdbs]
    duplicates = sorted({u for u in names if names.count(u) > 1})
    if duplicates:
        raise ValueError(f"{path}: usernames must be unique; repeated: {duplicates}")
    return sdbs


def save_sdbs(sdbs: Sequence[SDB], path: str | Path) -> None:
    """Write ``sdbs`` as JSON that ``load_sdbs`` reads back."""
    rows = [{**asdict(s), "personality": list(s.personality)} for s in sdbs]
    Path(path).write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
