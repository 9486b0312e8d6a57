"""Personas (specification §8): who an LLM agent is, generated from templates or loaded from a file.

A persona has a name, a role, a description, a stance on the discussion topic (``issue``), a
communication style, Big Five scores (the intended ones, and the ones the model's own Mini-IPIP
answers gave), and task weights ``lambdas`` (the reward mix it seeks).
``generate_personas`` draws diverse personas offline from templates with a seed (each role
comes with a lambda profile, in the paper's sense of a task); ``load_personas`` reads JSON or
CSV, or a bundled set by name (``PERSONA_SETS``: ``climate-change``, the core paper's setting);
``administer_mini_ipip`` gives each persona the Mini-IPIP pre-survey and stores the measured
Big Five beside the intended ones.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.platform.validation import is_number, show

TRAITS = ("E", "A", "C", "N", "I")
TRAIT_NAMES = {"E": "extraversion", "A": "agreeableness", "C": "conscientiousness",
               "N": "neuroticism", "I": "intellect/imagination"}

# Mini-IPIP (Donnellan et al. 2006): 20 public-domain IPIP items, 4 per trait; True = reverse-keyed.
MINI_IPIP: tuple[tuple[str, str, bool], ...] = (
    ("Am the life of the party.", "E", False),
    ("Sympathize with others' feelings.", "A", False),
    ("Get chores done right away.", "C", False),
    ("Have frequent mood swings.", "N", False),
    ("Have a vivid imagination.", "I", False),
    ("Don't talk a lot.", "E", True),
    ("Am not interested in other people's problems.", "A", True),
    ("Often forget to put things back in their proper place.", "C", True),
    ("Am relaxed most of the time.", "N", True),
    ("Am not interested in abstract ideas.", "I", True),
    ("Talk to a lot of different people at parties.", "E", False),
    ("Feel others' emotions.", "A", False),
    ("Like order.", "C", False),
    ("Get upset easily.", "N", False),
    ("Have difficulty understanding abstract ideas.", "I", True),
    ("Keep in the background.", "E", True),
    ("Am not really interested in others.", "A", True),
    ("Make a mess of things.", "C", True),
    ("Seldom feel blue.", "N", True),
    ("Do not have a good imagination.", "I", True),
)


def score_mini_ipip(answers: Mapping[int, int]) -> dict[str, float]:
    """Trait means on 1..5 from answers ``{item index: 1..5}``; reverse-keyed items count 6 - a.
    Traits with no answered item are omitted."""
    sums: dict[str, list[int]] = {t: [] for t in TRAITS}
    for index, answer in answers.items():
        _, trait, reverse = MINI_IPIP[index]
        sums[trait].append(6 - answer if reverse else answer)
    return {t: sum(v) / len(v) for t, v in sums.items() if v}


@dataclass(frozen=True)
class Persona:
    name: str
    role: str = "social media user"
    description: str = ""
    stance: str = "undecided"
    style: str = "plain and friendly"
    big_five: Mapping[str, float] = field(default_factory=dict)
    lambdas: Mapping[str, float] | None = None
    interests: tuple[str, ...] = ()
    issue: str = "the topic under discussion"
    """What ``stance`` is about; the reflect step asks the agent where it stands on it."""
    big_five_measured: Mapping[str, float] | None = None
    """The Big Five of the model's Mini-IPIP answers (``administer_mini_ipip``); None if not surveyed."""

    def __post_init__(self) -> None:
        for key in ("name", "role", "stance", "style", "issue"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"persona {key} must be a non-empty string, got {show(value)}")
        if not isinstance(self.description, str):
            raise ValueError(f"persona {self.name}: description must be a string, got {show(self.description)}")
        for key in ("big_five", "big_five_measured"):
            value = getattr(self, key)
            if value is None and key == "big_five_measured":
                continue
            if not isinstance(value, Mapping):
                raise ValueError(f"persona {self.name}: {key} must be a mapping of {TRAITS} to 1..5, "
                                 f"got {show(value)}")
            for trait, score in dict(value).items():
                if trait not in TRAITS:
                    raise ValueError(f"persona {self.name}: {key}[{show(trait)}] is not a trait; "
                                     f"big_five keys must be {TRAITS} with values in 1..5")
                if not is_number(score, numpy=False) or not 1 <= score <= 5:
                    raise ValueError(f"persona {self.name}: {key}[{trait!r}] must be a number in [1, 5], "
                                     f"got {show(score)}")
        if self.lambdas is not None:
            if not isinstance(self.lambdas, Mapping):
                raise ValueError(f"persona {self.name}: lambdas must map {REWARD_NAMES} to non-negative "
                                 f"weights summing to 1, got {show(self.lambdas)}")
            values = list(self.lambdas.values())
            if set(self.lambdas) != set(REWARD_NAMES) \
                    or any(not is_number(v, numpy=False) or v < 0 for v in values) \
                    or not abs(sum(values) - 1) <= 1e-6:
                raise ValueError(f"persona {self.name}: lambdas must map {REWARD_NAMES} to non-negative "
                                 f"weights summing to 1, got {show(dict(self.lambdas), 160)}")
        interests = self.interests
        if isinstance(interests, (str, bytes, Mapping)) or not isinstance(interests, (list, tuple)) \
                or not all(isinstance(t, str) and t.strip() for t in interests):
            raise ValueError(f"persona {self.name}: interests must be a list of non-empty strings, "
                             f"got {show(interests)}")
        object.__setattr__(self, "interests", tuple(interests))

    def personality(self) -> str:
        """A few words for prompts, from the Big Five scores (high >= 3.5, low <= 2.5)."""
        words = {"E": ("outgoing", "reserved"), "A": ("warm", "blunt"), "C": ("organised", "spontaneous"),
                 "N": ("anxious", "calm"), "I": ("imaginative", "down-to-earth")}
        out = [words[t][0] if v >= 3.5 else words[t][1] for t, v in self.big_five.items() if v >= 3.5 or v <= 2.5]
        return ", ".join(out) or "balanced"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["big_five"] = dict(self.big_five)
        d["lambdas"] = dict(self.lambdas) if self.lambdas is not None else None
        d["interests"] = list(self.interests)
        d["big_five_measured"] = dict(self.big_five_measured) if self.big_five_measured is not None else None
        return d


# ---------------------------------------------------------------------------- templates
_FIRST = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemi", "Luca",
          "Maya", "Nour", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Viktor", "Wen", "Yara", "Zoe")
_LAST = ("Alvarez", "Brandt", "Chen", "Diallo", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jansen",
         "Kowalski", "Laine", "Moreau", "Nakamura", "Okafor", "Petrov", "Rossi", "Silva", "Tanaka", "Weber")
# role -> (description template, lambda profile over SOC, INF, PRE, COORD, EMO)
ROLES: dict[str, tuple[str, tuple[float, float, float, float, float]]] = {
    "community builder": ("Connects people and keeps conversations going about {interest}.", (0.35, 0.1, 0.1, 0.3, 0.15)),
    "news curator": ("Follows {interest} closely and shares what is new.", (0.1, 0.5, 0.2, 0.1, 0.1)),
    "influencer": ("Posts often about {interest} and cares about reach.", (0.1, 0.1, 0.55, 0.15, 0.1)),
    "supporter": ("Encourages others and offers help, mostly around {interest}.", (0.25, 0.05, 0.05, 0.15, 0.5)),
    "organiser": ("Coordinates group efforts around {interest}.", (0.2, 0.1, 0.1, 0.5, 0.1)),
    "debater": ("Enjoys arguing positions on {interest} with evidence.", (0.3, 0.3, 0.2, 0.1, 0.1)),
    "casual user": ("Drops in now and then to chat about {interest}.", (0.2, 0.2, 0.2, 0.2, 0.2)),
}
# The stance scale (most in favour first): persona stances and the reflect step's opinion entries.
STANCES = ("strongly supports", "supports", "is undecided about", "is sceptical of", "strongly opposes")
STYLES = ("concise and factual", "warm with emojis", "witty and sarcastic", "formal and polite",
          "enthusiastic and loud", "curious, asks many questions", "calm and measured")


def generate_personas(n: int, seed: int = 0, *, topics: Sequence[str] = ("climate", "technology", "sports",
                      "health", "politics", "music", "science", "food"), issue: str = "the topic under discussion",
                      roles: Sequence[str] | None = None, lambdas: str = "role") -> list[Persona]:
    """``n`` diverse personas from templates, reproducible under ``seed``.

    ``lambdas="role"`` gives each persona its role's reward profile; ``"uniform"`` gives 0.2 each.
    Big Five scores are drawn uniformly in [1.5, 4.5] (the persona's intended traits; replace them
    with the model's own answers with ``administer_mini_ipip``).
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if lambdas not in ("role", "uniform"):
        raise ValueError(f"lambdas must be 'role' or 'uniform', got {lambdas!r}")
    roles = list(roles) if roles is not None else list(ROLES)
    if not roles:
        raise ValueError("roles must not be empty")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown role(s) {unknown}; known: {sorted(ROLES)}")
    if not topics:
        raise ValueError("topics must not be empty")
    rng = np.random.default_rng(seed)
    used: set[str] = set()
    out = []
    for i in range(n):
        name = f"{_FIRST[rng.integers(len(_FIRST))]} {_LAST[rng.integers(len(_LAST))]}"
        while name in used:
            name = f"{name.split(' #')[0]} #{i}"
        used.add(name)
        role = roles[i % len(roles)] if n >= len(roles) else roles[int(rng.integers(len(roles)))]
        template, profile = ROLES[role]
        k = int(rng.integers(1, min(3, len(topics)) + 1))
        interests = tuple(str(t) for t in rng.choice(list(topics), size=k, replace=False))
        weights = dict(zip(REWARD_NAMES, profile)) if lambdas == "role" else dict.fromkeys(REWARD_NAMES, 0.2)
        out.append(Persona(
            name=name, role=role, description=template.format(interest=" and ".join(interests)),
            stance=f"{STANCES[int(rng.integers(len(STANCES)))]} {issue}",
            style=STYLES[int(rng.integers(len(STYLES)))],
            big_five={t: round(float(rng.uniform(1.5, 4.5)), 1) for t in TRAITS},
            lambdas=weights, interests=interests, issue=issue))
    return out


def with_main_interest(persona: Persona, topic: str) -> Persona:
    """``persona`` with ``topic`` as its first interest (its others kept, at most three in all);
    a generated persona's description, which names its interests, is written again."""
    interests = (str(topic), *[t for t in persona.interests if t != topic])[:3]
    description = persona.description
    if persona.role in ROLES and persona.interests:
        old = ROLES[persona.role][0].format(interest=" and ".join(persona.interests))
        if description == old:
            description = ROLES[persona.role][0].format(interest=" and ".join(interests))
    return dataclasses.replace(persona, interests=interests, description=description)


MAX_PERSONA_FILE_BYTES = 64 * 2**20
"""Largest persona file read (64 MiB: far more than 100,000 personas of a few hundred bytes)."""


def load_personas(path: str | Path) -> list[Persona]:
    """Personas from a JSON list of objects, a CSV file, or a bundled set by name
    (``PERSONA_SETS``, e.g. ``"climate-change"``).

    CSV columns: ``name`` (required), ``role``, ``description``, ``stance``, ``style``,
    ``interests`` (separated by ``;``), Big Five as ``E``, ``A``, ``C``, ``N``, ``I``, and task
    weights as ``lambda_SOC`` … ``lambda_EMO`` (all five or none).

    Errors: ``FileNotFoundError`` for a missing file, ``ValueError`` (one line, naming the file
    and the item or row) for everything else — wrong suffix, not UTF-8, malformed JSON/CSV, an
    empty list, unknown or bad fields.
    """
    if isinstance(path, str) and path in PERSONA_SETS:
        return PERSONA_SETS[path]()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"persona file {path} does not exist (bundled sets: {sorted(PERSONA_SETS)})")
    if not path.is_file():
        raise ValueError(f"{path} is not a file (a persona file is .json or .csv)")
    suffix = path.suffix.lower()
    if suffix not in (".json", ".csv"):
        raise ValueError(f"{path}: persona files must be .json or .csv, got {show(path.suffix or '(no suffix)')}")
    size = path.stat().st_size
    if size > MAX_PERSONA_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes, more than MAX_PERSONA_FILE_BYTES = {MAX_PERSONA_FILE_BYTES}")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})") from None
    if suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
        except RecursionError:
            raise ValueError(f"{path}: not valid JSON: nested too deeply") from None
        except ValueError as err:            # e.g. an integer with more digits than Python reads
            raise ValueError(f"{path}: not valid JSON: {show(' '.join(str(err).split()), 200)}") from None
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a JSON list of persona objects, got a {type(rows).__name__}")
        personas = [_persona_from(row, f"{path} item {i}") for i, row in enumerate(rows)]
    else:
        try:
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as err:
            raise ValueError(f"{path}: not valid CSV: {' '.join(str(err).split())}") from None
        personas = [_persona_from(_csv_row(row, f"{path} row {i + 2}"), f"{path} row {i + 2}")
                    for i, row in enumerate(rows)]
    if not personas:
        raise ValueError(f"{path} holds no personas")
    return personas


_CSV_COLUMNS = {"name", "role", "description", "stance", "style", "interests", "issue", *TRAITS,
                *(f"lambda_{r}" for r in REWARD_NAMES)}


def _csv_row(row: dict, where: str) -> dict:
    if None in row:          # DictReader puts the cells beyond the header under the key None
        raise ValueError(f"{where}: more cells than the header has columns")
    unknown = sorted(str(k) for k in row if k not in _CSV_COLUMNS)
    if unknown:
        raise ValueError(f"{where}: unknown column(s) {show(unknown)}; known: {sorted(_CSV_COLUMNS)}")
    row = {k: (v or "") for k, v in row.items()}     # short rows: the missing cells are None
    out: dict[str, Any] = {k: v for k, v in row.items()
                           if k in {"name", "role", "description", "stance", "style", "issue"} and v}
    if row.get("interests"):
        out["interests"] = [t.strip() for t in row["interests"].split(";") if t.strip()]
    try:
        out["big_five"] = {t: float(row[t]) for t in TRAITS if row.get(t)}
        lam = {r: float(row[f"lambda_{r}"]) for r in REWARD_NAMES if row.get(f"lambda_{r}")}
    except ValueError as err:
        raise ValueError(f"{where}: {' '.join(str(err).split())}") from None
    if lam:
        out["lambdas"] = lam
    return out


def _persona_from(row: Any, where: str) -> Persona:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object, got {type(row).__name__} {show(row)}")
    known = {f.name for f in dataclasses.fields(Persona)}
    unknown = set(row) - known
    if unknown:
        raise ValueError(f"{where}: unknown persona field(s) {show(sorted(map(str, unknown)))}; "
                         f"known: {sorted(known)}")
    try:
        return Persona(**{k: v for k, v in row.items() if v is not None or k == "lambdas"})
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {' '.join(str(err).split())}") from None


def personas_for(new: Sequence[str], given, have: int, seed) -> dict[str, Persona]:
    """The personas of agents ``new`` when ``have`` agents already got theirs from the same source:
    drawn from templates (``given`` None; the agent at position i always gets the i-th draw of
    ``seed``), looked up (a mapping), or the next ones of a sequence. ValueError when the source
    lacks some."""
    if given is None:
        return dict(zip(new, generate_personas(have + len(new), seed=seed)[have:]))
    if isinstance(given, Mapping):
        missing = [a for a in new if a not in given]
        if missing:
            raise ValueError(f"no persona for agent(s) {missing[:5]}")
        return {a: given[a] for a in new}
    given = list(given)
    if have + len(new) > len(given):
        raise ValueError(f"{len(given)} personas for {have + len(new)} agents; give one persona per agent")
    return dict(zip(new, given[have:]))


def lambdas_matrix(personas: Sequence[Persona]) -> np.ndarray:
    """(n, 5) task weights in REWARD_NAMES order, for the env's ``lambdas=`` (uniform if unset)."""
    return np.array([[p.lambdas[r] if p.lambdas else 0.2 for r in REWARD_NAMES] for p in personas], float)


async def _survey_one(client, persona: Persona, prompts, agent: str | None):
    from socialgym.llm.schemas import check_survey, survey_schema

    items = "\n".join(f"q{i + 1}. {text}" for i, (text, _, _) in enumerate(MINI_IPIP))
    fields = dict(name=persona.name, role=persona.role, description=persona.description,
                  stance=persona.stance, style=persona.style)
    messages = [{"role": "system", "content": prompts.render("survey_system", **fields)},
                {"role": "user", "content": prompts.render("survey_user", items=items, n_items=len(MINI_IPIP))}]
    n = len(MINI_IPIP)
    return await client.complete_json(messages, survey_schema(n), lambda v: check_survey(v, n), name="mini_ipip",
                                      agent=agent, round=0, purpose="survey", max_tokens=256, repair=prompts.repair)


def administer_mini_ipip(client, personas: Sequence[Persona], prompts=None,
                         agents: Sequence[str] | None = None) -> list[Persona]:
    """Each persona answers the Mini-IPIP (concurrently); returns the personas with the measured
    Big Five in ``big_five_measured`` (the intended ``big_five`` stays as it was).

    A persona whose survey fails is returned unchanged (``big_five_measured`` None); the failure
    is recorded in ``client.usage.fallbacks`` (purpose ``survey``).
    """
    import asyncio

    from socialgym.llm.prompts import PromptSet
    from socialgym.llm.usage import Fallback

    prompts = prompts or PromptSet()
    agents = list(agents) if agents is not None else [None] * len(personas)

    async def all_surveys():
        return await asyncio.gather(*(_survey_one(client, p, prompts, a) for p, a in zip(personas, agents)))

    out = []
    for persona, agent, reply in zip(personas, agents, client.run(all_surveys())):
        if reply.ok:
            measured = {k: round(v, 2) for k, v in score_mini_ipip(reply.checked.value).items()}
            out.append(dataclasses.replace(persona, big_five_measured=measured))
        else:
            client.usage.record_fallback(Fallback(agent, 0, "survey", None, reply.error, "not measured"))
            out.append(persona)
    return out


# ---------------------------------------------------------------------------- bundled sets
_CLIMATE_ROLES = (
    ("community builder", "Runs a neighbourhood group and likes to bring people into the climate conversation."),
    ("news curator", "Reads climate research and energy news every day and passes on what is new."),
    ("influencer", "Has a large following and posts about lifestyle, energy prices and the climate debate."),
    ("supporter", "Listens first and encourages people who feel worried or unheard about climate change."),
    ("organiser", "Coordinates local events and petitions around climate and energy policy."),
    ("debater", "Likes to argue positions on climate policy with numbers and sources."),
)
_CLIMATE_TOPICS = ("climate", "energy", "transport", "food", "economy", "science", "policy", "weather")


def climate_change_personas(n: int = 30) -> list[Persona]:
    """The core paper's setting: a discussion of climate change. ``n`` personas (30 by default,
    the paper's |V|) whose stances are spread evenly over the five levels from strongly against
    to strongly for action on climate change, roles cycling through six kinds, Big Five and
    interests drawn with a fixed seed, and each role's lambda profile (``ROLES``). The set is
    the same on every machine."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(2025)
    issue = "action on climate change"
    out = []
    for i in range(n):
        name = f"{_FIRST[i % len(_FIRST)]} {_LAST[(7 * i + 3) % len(_LAST)]}"
        role, description = _CLIMATE_ROLES[i % len(_CLIMATE_ROLES)]
        stance = STANCES[(i * len(STANCES)) // n]          # an even spread over the scale
        interests = ("climate",) + tuple(str(t) for t in rng.choice(_CLIMATE_TOPICS[1:], size=2, replace=False))
        out.append(Persona(
            name=name, role=role, description=description, stance=f"{stance} {issue}",
            style=STYLES[int(rng.integers(len(STYLES)))],
            big_five={t: round(float(rng.uniform(1.5, 4.5)), 1) for t in TRAITS},
            lambdas=dict(zip(REWARD_NAMES, ROLES[role][1])), interests=interests, issue=issue))
    return out


PERSONA_SETS = {"climate-change": climate_change_personas}
"""Bundled persona sets, selectable by name wherever a persona file is accepted."""
