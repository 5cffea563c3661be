"""What a backend serves now, and the one seam through which that changes
(:meth:`ServedSession.serve`)."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ProviderFallbackWarning
from ..log import user_stacklevel
from ..pipeline.build_pipeline import ServeChange, Served
from ..providers.configs import CPU_EP
from ..session.build import SessionBuild, create_planned
from ..session.plan import SessionPlan, StalePlanError

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint
    from ..pipeline.report import Candidate, ProviderReport, ServingSummary
    from ..pipeline.traffic_check import TrafficCheck
    from ..providers.session_options import SessionOptionsConfig
    from ..session.inflight import RunOptionsInFlight
    from ..session.run_into import IntoRunner
    from ..verification.verdicts import Verdict

__all__ = ["ServedSession"]


class ServedSession:
    """The session serving now with its plan, verdict and the verified choices left."""

    def __init__(
        self,
        session: Any,
        inflight: RunOptionsInFlight,
        into: Callable[[Any], IntoRunner],
    ) -> None:
        self._inflight = inflight
        self._into_for = into
        #: Held by a rebuild (a custom-op library) and a start-up switch: never both at once.
        self.rebuild_lock = threading.Lock()
        self._fallback_lock = threading.Lock()
        self._lock = threading.Lock()  # a switch, a watch change and close take turns
        self.watch: TrafficCheck | None = None
        self.plan: SessionPlan | None = None
        self.options: SessionOptionsConfig | None = None
        self.checkpoint: ResolvedCheckpoint | None = None  # owns in-memory weights ORT reads
        self.build_messages: tuple[str, ...] = ()
        self.chain_reasons: tuple[tuple[str, str], ...] = ()
        self.verification: Verdict | None = None
        self.candidates: tuple[Candidate, ...] = ()
        #: The verified choices left for a run-time fallback, best first.
        self.fallbacks: tuple[SessionPlan, ...] = ()
        self.origin: ResolvedCheckpoint | None = None
        self.adopt(session)
        self.requested = self.providers

    def adopt(self, session: Any) -> None:
        """Serve ``session`` from now on (at construction and after a rebuild)."""
        self.session: Any = session
        self.providers: tuple[str, ...] = tuple(session.get_providers())
        self.into = self._into_for(session)
        self.run: Callable[..., list[Any]] = self._tapped(session)

    def _tapped(self, session: Any) -> Callable[..., list[Any]]:
        """``session``'s run with the shared run options, each request shown to the watch."""
        run = functools.partial(session.run, run_options=self._inflight.shared)
        watch = self.watch
        return run if watch is None else watch.wrap(run, self.plan)

    def register(self, library: str, checked: Callable[[Any], Any]) -> None:
        """Serve a rebuild of the plan serving now with custom-op ``library`` added (``checked``:
        the owner's check of a new session); a start-up switch waits, then builds with it too."""
        with self.rebuild_lock:
            session, options = self._rebuilt_with(library)
            self.adopt(checked(session))
            self.options = options

    def tap_written(self, feed: Any, written: Mapping[str, Any]) -> None:
        """Show the watch a ``run_into``'s request and the caller's arrays it wrote."""
        watch = self.watch
        if watch is not None:
            watch.tap(list(written), feed, list(written.values()), self.plan, owned=True)

    def _rebuilt_with(self, library: str) -> tuple[Any, SessionOptionsConfig]:
        """A new session of the plan serving now with custom-op ``library`` added, and its
        options (hold :attr:`rebuild_lock`)."""
        if self.plan is None or self.checkpoint is None or self.options is None:
            raise RuntimeError(
                "register_custom_op_library: this backend wraps a session it did not build; "
                "build it with OnnxBackend.from_checkpoint to let it rebuild"
            )
        options = self.options.evolve(
            custom_op_libraries=(*self.options.custom_op_libraries, library)
        )
        return create_planned(self.checkpoint, self.plan, options).session, options

    def take_plan(
        self, resolved: ResolvedCheckpoint, plan: SessionPlan, build: SessionBuild
    ) -> None:
        """Record what ``build`` was asked for and why (at construction and at a switch)."""
        self.requested = build.requested
        self.build_messages = build.messages
        self.chain_reasons = tuple(zip((c.kind for c in plan.chain), plan.reasons))
        if plan.device_policy is not None:
            reason = f"chosen by ONNX Runtime's {plan.device_policy} device policy"
            self.chain_reasons = tuple((name, reason) for name in build.session.get_providers())
        self.options = plan.options
        self.plan = plan
        self.checkpoint = resolved

    def serve(self, change: ServeChange) -> Served:
        """Apply ``change``; :class:`~ortplug.session.plan.StalePlanError` when a switch's plan
        lacks custom-op libraries registered on this backend since it was made."""
        moved = True
        if change.failed is not None:
            moved = self.next_choice(change.failed, change.instead)
        result = change.result
        if result is not None and change.switch:
            moved = self._switch_to(result.weights, result.plan, result.build)
        if result is not None and moved:
            self.verification = result.verdict
            self.candidates = result.candidates
            self.fallbacks = result.fallbacks
            self.origin = result.origin
        if change.candidates is not None:
            self.candidates = change.candidates
        if change.set_watch:
            moved = self._watch_with(change.watch) and moved
        return Served(moved, self.plan, self.session, self.candidates)

    def _watch_with(self, watch: TrafficCheck | None) -> bool:
        """Show ``watch`` every run's request and outputs from now on (``None``: nothing); the
        watch it replaces is stopped. False when the backend is closed."""
        with self._lock:
            live = self.session is not None
            old, self.watch = self.watch, watch if live else None
            if live:
                self.run = self._tapped(self.session)
        if old is not None and old is not self.watch:
            old.stop()
        if watch is not None and not live:
            watch.stop()
        return live

    def _switch_to(
        self, resolved: ResolvedCheckpoint, plan: SessionPlan, build: SessionBuild
    ) -> bool:
        """Serve ``build``'s session from the next run on; False when the backend was closed."""
        with self.rebuild_lock, self._lock:
            if self.session is None:
                return False
            registered = self.options.custom_op_libraries if self.options else ()
            missing = [lib for lib in registered if lib not in plan.options.custom_op_libraries]
            if missing:
                raise StalePlanError(tuple(missing))
            self.take_plan(resolved, plan, build)
            self.adopt(build.session)
            return True

    def next_choice(self, failed: Any, instead: SessionPlan | None = None) -> bool:
        """Serve ``instead`` (default: the next verified choice) in place of ``failed``, the
        session that served when it failed; False when none is left or it cannot be built now
        (True when another thread already moved on)."""
        with self._fallback_lock:
            if self.session is not failed:
                return self.session is not None
            if instead is not None:
                plan = instead
            elif self.fallbacks and self.origin is not None:
                plan, *rest = self.fallbacks
                self.fallbacks = tuple(rest)
            else:
                return False
            if self.options is not None:  # with what was registered since it was planned
                plan = plan.with_custom_op_libraries(self.options.custom_op_libraries)
            resolved = plan.variant or self.origin
            if resolved is None:
                return False
            try:
                build = create_planned(resolved, plan, plan.options)
                return self._switch_to(resolved, plan, build)
            except Exception:  # it cannot be built now, or a library came meanwhile: it stands
                return False

    def report(
        self, session: Any, startup: str | None, serving: ServingSummary | None
    ) -> ProviderReport:
        """Why ``session`` (serving now) runs where it runs, with the start-up and serving lines."""
        from ..pipeline.report import ProviderReport
        from ..session.placement import recorded_node_counts

        try:
            nodes = recorded_node_counts(session)
        except RuntimeError:
            nodes = {}
        return ProviderReport.of(
            self.plan,
            requested=self.requested,
            realized=self.providers,
            provider_options=session.get_provider_options(),
            nodes=nodes,
            messages=self.build_messages,
            reasons=self.chain_reasons,
            verification=self.verification,
            candidates=self.candidates,
            startup=startup,
            serving=serving,
        )

    def fall_back(self, error: Exception, model: str) -> bool:
        """After a provider's ``error`` in a run (not the caller's inputs, not a terminated run):
        serve on the next verified choice, said in one warning; False when there is none."""
        failed = self.session
        if (
            failed is None
            or not self.fallbacks
            or self.origin is None
            or all(name == CPU_EP for name in self.providers)
        ):
            return False
        was = list(self.providers)
        if not self.next_choice(failed):
            return False
        warnings.warn(
            f"{model}: {was} failed at run time "
            f"({type(error).__name__}: {' '.join(str(error).split())[:300]}); serving on "
            f"{list(self.providers)} from now on (call retried once)",
            ProviderFallbackWarning,
            stacklevel=user_stacklevel(),
        )
        return True

    def close(self, closed_run: Callable[..., Any]) -> None:
        """Serve nothing: every later run calls ``closed_run``; the watch stops, and every
        thread's ``run_into`` binding is dropped."""
        with self._lock:
            self.session = None
        self._watch_with(None)
        self.run = closed_run
        self.into = self._into_for(None)
        self.checkpoint = None
        self.fallbacks = ()
