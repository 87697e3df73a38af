"""What the core asks of a plug-in that owns a config section (a benchmark, a memory method),
and how the registry holds every plug-in to its seam.

A seam is a base class in the floor that drives it (``bench.base.Benchmark``,
``methods.base.Memory``, both ``Plugin``s): its optional hooks are defined there once, with
their defaults, so a call site calls a hook and never looks one up; what has no sensible
default is named in ``required_hooks``. The registry checks a plug-in against its seam when it
loads it (``breach``), so a plug-in missing a hook is refused in one line naming the hook,
not half-way through a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class Section:
    """Base of a plug-in's config dataclass (``Plugin.config_class``): the ``benchmark`` or
    ``memory`` section of the config, validated by it. Validating a config loads only this
    class (``core.registry.Registry.section``), so its module stays light: the plug-in's own
    module, and the libraries its runs need, are imported when it runs."""

    def check(self) -> None:
        """The plug-in's own rules (choices, bounds) once the section is typed: a
        ``UserError`` in one line (``core.config.check_choices`` writes most of them)."""

    def settle(self, cfg: Any) -> None:
        """Fill keys left unset (None) whose value depends on the rest of the validated config
        ``cfg`` (e.g. on the benchmark), so the run's config.yaml and hash hold the value it
        used. The benchmark's section settles first, then the method's."""


class Plugin:
    """A plug-in class that owns a config section: what ``core/config.py`` asks of it."""

    # The hooks without a default: a plug-in missing one is refused when it is loaded.
    required_hooks: ClassVar[tuple[str, ...]] = ("config_class",)

    # Its section's dataclass (a subclass of ``config_base``): keys, defaults, its own ``check()``.
    config_class: ClassVar[type[Section] | None] = None
    config_base: ClassVar[type[Section]] = Section  # what a seam's sections extend

    # Keys of its section (relative to it) added after runs were made, each with the value at
    # which a run behaves as it did before the key existed: at that value the key stays out of
    # the run hash, so an earlier run directory still resumes.
    hash_neutral: ClassVar[Mapping[str, Any]] = {}
    # Keys of its section that say only where something lives (a folder, an installation),
    # each with the one value it is hashed at whatever it holds (``core/config.py``'s rule for
    # path-like keys): the same run from another folder or machine resumes.
    where_keys: ClassVar[Mapping[str, Any]] = {}


def breach(obj: Any, base: type, hooks: tuple[str, ...]) -> str | None:
    """What ``obj`` lacks to stand for ``base`` (a plug-in class must subclass it) and its
    ``hooks`` (each present, not None, not an abstract placeholder), said in a few words for
    a one-line error; None when it has everything."""
    if not (isinstance(obj, type) and issubclass(obj, base)):
        return f"is not a subclass of {base.__module__}.{base.__qualname__}"
    missing = [h for h in hooks if _lacks(obj, h)]
    if missing:
        return f"has no {', '.join(missing)} (required by {base.__module__}.{base.__qualname__})"
    config, want = getattr(obj, "config_class", None), getattr(base, "config_base", Section)
    if "config_class" in hooks and not (isinstance(config, type) and issubclass(config, want)):
        return f"has a config_class {config!r} that is not a subclass of {want.__module__}.{want.__qualname__}"
    return None


def _lacks(obj: Any, hook: str) -> bool:
    value = getattr(obj, hook, None)
    return value is None or getattr(value, "__isabstractmethod__", False)


def missing_hooks(obj: Any, hooks: tuple[str, ...]) -> list[str]:
    """Which of ``hooks`` ``obj`` (a plug-in that need not subclass anything: a module, a
    protocol's class) does not have."""
    return [h for h in hooks if _lacks(obj, h)]
