"""A kept measurement of an endpoint: what `reme check` measured (and scripts/bench_vllm.py's
full sweep), read by the plan (``run/cost.py``) instead of its assumed rates.

One JSON file per model config and host, beside reme's other per-user state
(``<REME_CACHE_DIR or .reme_cache>/calibration/MODEL@HOST.json``; ``cost.calibration=FILE``
writes or reads another): when and against which host it was measured, the generated and
prompt tokens per second at each concurrency tried (``points``, the format bench_vllm.py
has always written) and, from `reme check`, the seconds one answer of the run's shape took.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.core.io import now, write_json_atomic
from reme_cli.core.reading import JsonFile

FOLDER = "calibration"
FILE = JsonFile("a cost.calibration file", fix="measure again with `reme check` (or scripts/bench_vllm.py)",
                shape={"points": list, "model": (str, type(None)), "host": (str, type(None)),
                       "base_url": (str, type(None)), "measured_at": (str, type(None)),
                       "seconds_per_answer": (float, type(None)), "tool": (str, type(None))})
OPTION = "cost.calibration"


@dataclass(frozen=True)
class Calibration:
    model: str  # the model the server served
    host: str  # where it was served: a host[:port], or the machine that started the server
    measured_at: str  # ISO 8601, UTC
    points: list[dict[str, Any]]  # concurrency, prompt_tokens_per_s, generated_tokens_per_s (each > 0)
    base_url: str | None = None
    seconds_per_answer: float | None = None  # median seconds of one answer of the run's shape
    tool: str = "reme check"  # what measured it
    extra: dict[str, Any] = field(default_factory=dict)  # what the tool measured besides
    path: Path | None = None  # where it was read from

    @classmethod
    def measured(cls, model: str, base_url: str | None, points: list[dict[str, Any]], tool: str, *,
                 host: str | None = None, seconds_per_answer: float | None = None,
                 extra: dict[str, Any] | None = None) -> Calibration:
        return cls(model, host or host_of(base_url), now(), points, base_url, seconds_per_answer, tool,
                   dict(extra or {}))

    @property
    def date(self) -> str:
        return self.measured_at[:10]

    @property
    def label(self) -> str:
        """How a plan names its source: ``calibrated on DATE against HOST``."""
        return f"calibrated on {self.date or 'an unrecorded date'} against {self.host}"

    def rates(self) -> tuple[dict[int, float], dict[int, float]]:
        """(generated, prompt) tokens per second by concurrency."""
        return ({int(p["concurrency"]): float(p["generated_tokens_per_s"]) for p in self.points},
                {int(p["concurrency"]): float(p["prompt_tokens_per_s"]) for p in self.points})

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "host": self.host, "base_url": self.base_url, "measured_at": self.measured_at,
                "tool": self.tool, "seconds_per_answer": self.seconds_per_answer, **self.extra,
                "points": self.points}

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, self.to_dict())
        return path

    @classmethod
    def read(cls, path: str | Path) -> Calibration:
        """The file at ``path``; a one-line UserError if it is not one."""
        path = Path(path)
        try:
            data = FILE.read(path)
            if data is None:
                raise ValueError("no such file")
            points = list(data.get("points") or [])
            cal = cls(str(data.get("model") or "?"), str(data.get("host") or host_of(data.get("base_url"))),
                      str(data.get("measured_at") or ""), points, data.get("base_url"), _seconds(data.get("seconds_per_answer")),
                      str(data.get("tool") or "scripts/bench_vllm.py"), path=path)
            generated, prompt = cal.rates()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{OPTION}={path}: not a calibration written by reme check or scripts/bench_vllm.py "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        if any(v <= 0 for v in (*generated.values(), *prompt.values())):
            raise UserError(f"{OPTION}={path} holds a rate that is not positive")
        if not points and cal.seconds_per_answer is None:
            raise UserError(f"{OPTION}={path} holds no measurement (no rates, no seconds per answer)")
        return cal


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    seconds = float(value)
    if seconds <= 0:
        raise ValueError(f"seconds_per_answer {value} is not positive")
    return seconds


def host_of(base_url: Any) -> str:
    """``host[:port]`` of a server URL (its first, for replicas)."""
    if isinstance(base_url, (list, tuple)):
        base_url = base_url[0] if base_url else None
    if not base_url:
        return "?"
    return urlsplit(str(base_url)).netloc or str(base_url)


def host_key(cfg: Config) -> str:
    """The host a run's model is served from: ``llm.base_url``'s, else the server reme starts
    for it here (the embedded llama.cpp model, a managed vLLM)."""
    if cfg.llm.base_url:
        return host_of(cfg.llm.base_url)
    return f"{'embedded' if cfg.model.kind == 'local' else 'managed'}@{socket.gethostname()}"


def default_path(cfg: Config) -> Path:
    """Where `reme check` keeps the measurement of ``cfg``'s model and host, beside the
    response cache (``llm.cache_dir``'s parent)."""
    name = f"{cfg.model.name}@{host_key(cfg)}"
    safe = "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in name)
    return Path(cfg.llm.cache_dir).parent / FOLDER / f"{safe}.json"


def kept(cfg: Config, given: str | None = None) -> Calibration | None:
    """The measurement a plan of ``cfg`` uses: the file ``cost.calibration`` names (``given``),
    else the one `reme check` kept for this model and host, else None (assumed rates)."""
    if given:
        return Calibration.read(given)
    path = default_path(cfg)
    return Calibration.read(path) if path.exists() else None
