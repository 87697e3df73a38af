"""ACE's playbook: sections of bullets, each with an id and helpful/harmful counters, and
the deterministic merge of what the Reflector and Curator propose.

Follows ace-agent/ace-appworld 748a9dc ``experiments/code/ace/playbook.py`` and
``utils.get_section_slug``: a section key is its header lower-cased with spaces as ``_``,
``&`` as ``and`` and no trailing ``:``; a new bullet's id is ``{slug}-{n:05d}`` with ``n``
one global counter (one above the highest numbered id in the initial playbook); an ADD goes
to the end of its section, or to OTHERS if the playbook has no such section. Bullets render
as ``[id] content`` (the AppWorld code drops the counters from the text;
``show_counts`` renders ace-agent/ace's ``[id] helpful=X harmful=Y :: content`` instead).

Events (logged by the seam, replayed on resume): ``{"op": "tag", "id", "tag"}`` adds one to
the bullet's helpful or harmful counter (neutral: none); ``{"op": "add", "section",
"content"}`` is proposed without an id, and ``apply`` gives it its id (or, with
de-duplication, ``duplicate_of``: the kept bullet it repeats), so a replay reproduces the
same playbook without re-embedding anything.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now, write_json_atomic
from reme_cli.core.reading import JsonFile

METHOD = "ace"
FORMAT = "reme-ace-playbook"
MANIFEST, PLAYBOOK, TEXT = "manifest.json", "playbook.json", "playbook.txt"
TAGS = ("helpful", "harmful", "neutral")
_FIX = "rebuild it with `reme build-pool memory=ace` or restore the file from a copy"
PLAYBOOK_MANIFEST = JsonFile("an ACE playbook's manifest.json", fix=_FIX, shape={
    "format": str, "method": str, "files": dict, "bullets": int, "version": dict, "built_by": dict})
PLAYBOOK_STATE = JsonFile("an ACE playbook's playbook.json", fix=_FIX, shape={
    "headers": list, "bullets": list, "next_id": int, "ops_applied": int},
    required=("headers", "bullets", "next_id", "ops_applied"))

# ace-appworld utils.get_section_slug's table.
SLUGS = {
    "strategies_and_hard_rules": "shr", "hard_rules": "hr", "strategies_and_insights": "si",
    "apis_to_use_for_specific_information": "api", "useful_code_snippets_and_templates": "code",
    "code_snippets_and_templates": "code", "common_mistakes_and_correct_strategies": "cms",
    "common_mistakes_to_avoid": "err", "problem_solving_heuristics_and_workflows": "psw",
    "problem_solving_heuristics": "prob", "verification_checklist": "vc", "troubleshooting_and_pitfalls": "ts",
    "others": "misc", "meta_strategies": "meta",
}
# The sections curator_call accepts (adaptation_react.py); ADDs elsewhere are skipped.
ALLOWED_SECTIONS = frozenset({
    "strategies_and_hard_rules", "apis_to_use_for_specific_information", "useful_code_snippets_and_templates",
    "common_mistakes_and_correct_strategies", "problem_solving_heuristics_and_workflows",
    "verification_checklist", "troubleshooting_and_pitfalls", "others"})
_LINE = re.compile(r"\[([^\]]+)\]\s*(?:helpful=(\d+)\s*harmful=(\d+)\s*::\s*)?(.*)")


def section_key(header: str) -> str:
    return header.strip().lower().replace(" ", "_").replace("&", "and").rstrip(":")


def slug(section: str) -> str:
    key = section_key(section)
    if key in SLUGS:
        return SLUGS[key]
    words = key.split("_")
    return words[0][:4] if len(words) == 1 else "".join(w[0] for w in words[:5])


@dataclass
class Bullet:
    id: str
    section: str  # its section key
    content: str
    helpful: int = 0
    harmful: int = 0
    source: str = ""  # the unit (or "initial") it came from

    def line(self, show_counts: bool = False) -> str:
        if show_counts:
            return f"[{self.id}] helpful={self.helpful} harmful={self.harmful} :: {self.content}"
        return f"[{self.id}] {self.content}"


class Playbook:
    def __init__(self, headers: list[str], bullets: list[Bullet], next_id: int, ops_applied: int = 0,
                 built_by: dict[str, Any] | None = None):
        self.headers = headers  # section headers as written ("## OTHERS"), in order
        self.bullets = bullets  # in insertion order; rendering groups them by section
        self.next_id = next_id
        self.ops_applied = ops_applied  # events applied since the initial playbook (its version)
        self.built_by = built_by or {}

    # ------------------------------------------------------------------ text
    @classmethod
    def parse(cls, text: str) -> Playbook:
        """A playbook from its text (the authors' initial playbook file)."""
        headers, bullets, section, top = [], [], "general", 0
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("##"):
                headers.append(line)
                section = section_key(line[2:])
            elif line and (m := _LINE.match(line)):
                bullets.append(Bullet(m.group(1), section, m.group(4).strip(), int(m.group(2) or 0),
                                      int(m.group(3) or 0), "initial"))
                if n := re.search(r"-(\d+)$", m.group(1)):
                    top = max(top, int(n.group(1)))
        return cls(headers, bullets, top + 1)

    def section_keys(self) -> list[str]:
        return [section_key(h[2:]) for h in self.headers]

    def ordered(self) -> list[Bullet]:
        """Bullets in rendering order: by section, then insertion; unknown sections last."""
        keys = self.section_keys()
        rank = {k: i for i, k in enumerate(keys)}
        return sorted(self.bullets, key=lambda b: rank.get(b.section, len(keys)))

    def render(self, keep: set[str] | None = None, show_counts: bool = False) -> str:
        """The playbook text: every header, each followed by its bullets (those in ``keep``)."""
        by_section: dict[str, list[str]] = {}
        for b in self.ordered():
            if keep is None or b.id in keep:
                by_section.setdefault(b.section, []).append(b.line(show_counts))
        blocks = []
        for header, key in zip(self.headers, self.section_keys()):
            blocks.append("\n".join([header, *by_section.pop(key, [])]))
        blocks += ["\n".join(lines) for lines in by_section.values()]
        return "\n\n".join(blocks)

    def version(self) -> dict[str, Any]:
        return {"ops_applied": self.ops_applied, "bullets": len(self.bullets),
                "sha256": hashlib.sha256(self.render(show_counts=True).encode()).hexdigest()[:16]}

    # ------------------------------------------------------------------ events
    def _find(self, bullet_id: str) -> Bullet | None:
        return next((b for b in self.bullets if b.id == bullet_id), None)

    def _target(self, section: str) -> str:
        key = section_key(section)
        return key if key in self.section_keys() else "others"

    def apply(self, events: list[dict[str, Any]], unit: str = "", embed: Any = None,
              threshold: float = 1.0) -> list[dict[str, Any]]:
        """Apply proposed events (tags, then ADDs get ids); returns them as they happened.
        ``embed`` (texts -> L2-normalized rows) turns on de-duplication: an ADD whose cosine
        similarity to a bullet reaches ``threshold`` is dropped as its duplicate."""
        out = []
        for e in events:
            e = dict(e)
            if e["op"] == "add" and "id" not in e and "duplicate_of" not in e:
                e["section"] = self._target(e["section"])
                twin = self._duplicate(e["content"], embed, threshold) if embed is not None else None
                if twin:
                    e["duplicate_of"] = twin
                else:
                    e["id"] = f"{slug(e['section'])}-{self.next_id:05d}"
                e.setdefault("source", unit)
            self.replay([e])
            out.append(e)
        return out

    def replay(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            if e["op"] == "tag":
                bullet = self._find(e["id"])
                if bullet is not None and e["tag"] in ("helpful", "harmful"):
                    setattr(bullet, e["tag"], getattr(bullet, e["tag"]) + 1)
                    self.ops_applied += 1
            elif e["op"] == "add" and e.get("id"):
                self.bullets.append(Bullet(e["id"], e["section"], e["content"], source=e.get("source", "")))
                if n := re.search(r"-(\d+)$", e["id"]):
                    self.next_id = max(self.next_id, int(n.group(1)) + 1)
                self.ops_applied += 1

    def _duplicate(self, content: str, embed: Any, threshold: float) -> str | None:
        """The first bullet (in rendering order) at least ``threshold`` similar, as the
        authors' BulletpointAnalyzer keeps the first of a group when it does not merge."""
        bullets = self.ordered()
        if not bullets:
            return None
        rows = embed([content] + [b.content for b in bullets])
        sims = np.asarray(rows[1:]) @ np.asarray(rows[0])
        hits = [i for i, s in enumerate(sims) if s >= threshold]
        return bullets[hits[0]].id if hits else None

    # ------------------------------------------------------------------ files
    def copy(self) -> Playbook:
        return copy.deepcopy(self)

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        state = {"headers": self.headers, "next_id": self.next_id, "ops_applied": self.ops_applied,
                 "bullets": [asdict(b) for b in self.bullets]}
        write_json_atomic(path / PLAYBOOK, state)
        (path / TEXT).write_text(self.render(show_counts=True) + "\n")
        write_json_atomic(path / MANIFEST, {
            "format": FORMAT, "method": METHOD, "files": integrity.record(path, (PLAYBOOK, TEXT)),
            "bullets": len(self.bullets), "version": self.version(), "built_by": self.built_by, "updated_at": now()})

    @classmethod
    def load(cls, path: Path) -> Playbook:
        manifest = PLAYBOOK_MANIFEST.read(path / MANIFEST)
        if manifest is None:
            raise UserError(f"{path} is not an ACE playbook (no {MANIFEST}); {_FIX}")
        integrity.verify(path, manifest.get("files"), (PLAYBOOK, TEXT), _FIX)
        state = PLAYBOOK_STATE.read(path / PLAYBOOK) or {}
        try:
            return cls(state["headers"], [Bullet(**b) for b in state["bullets"]], state["next_id"],
                       state["ops_applied"], manifest.get("built_by"))
        except (KeyError, TypeError) as exc:  # a bullet that is not one
            raise UserError(f"{path} is not a readable ACE playbook ({exc}); rebuild it with "
                            "`reme build-pool memory=ace`") from None
