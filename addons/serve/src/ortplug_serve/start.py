"""The serving stage of a throughput build: devices, batching, layouts (measured or recorded), server.

Runs after the core's build pipeline (:mod:`ortplug.pipeline.build_pipeline`) chose what
serves, handed over as a :class:`~ortplug.backend.dispatch.ServingStart`. Under
``cumulative_throughput`` every other choice of the policy that runs on another device is
built and verified too (verdicts are cached, so later builds only build them). Batching is
used when the model batches (:func:`~.rows.batching_of`) and its rows were proven independent
on varied rows (:func:`~.independence.rows_checked`; a model that fails is served request by
request, with a :class:`~.independence.ServingWarning`); the server re-checks each row count
on real requests before trusting it. The layouts come from the record of an earlier build of
this model here, else from measuring (:mod:`.measure`), then recorded; with measuring off
(``measure=False``,
``ORTPLUG_MEASURE=0``) or inputs that cannot be generated, from the defaults. A device whose
measured rate is under :data:`MIN_SHARE` of the fastest one's serves nothing (it would only add
latency). A server of one device is watched (:mod:`.watch`): its layout compared with the
latency path on live traffic, replaced while serving when it falls behind, the record rewritten.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from ortplug.backend.dispatch import ServingStart
from ortplug.checkpoint import ResolvedCheckpoint, Tolerance
from ortplug.errors import (
    CacheError,
    OptionError,
    OptionTypeError,
    OrtplugCacheWarning,
    OrtplugError,
)
from ortplug.log import user_stacklevel
from ortplug.providers.session_options import SessionOptionsConfig
from ortplug.session.build import create_planned
from ortplug.session.plan import SessionPlan
from ortplug.session.serial import serialised
from ortplug.verification.sample_inputs import carried_samples

from . import inputs, record
from .config import DeviceServing, Layout, ServingConfig, ServingReport, Trial
from .devices import DevicePlan, StreamBuilder, device_plans, usable_cpus
from .independence import RowChecks, ServingWarning, rows_checked
from .inputs import TrafficInputs
from .measure import CALLERS, batch_limit, best_of, candidate_layouts, default_layout, measure
from .rows import Batching, batching_of
from .server import Device, Server, Stream
from .watch import Watch, alternatives

__all__ = ["MIN_SHARE", "serve", "start_serving"]

#: A device serving under this share of the fastest device's requests per second is not used.
MIN_SHARE = 0.05
#: The longest line a record keeps (:mod:`.record` refuses longer ones; "recorded: " comes first).
_LINE = 380


def _cpu_budget(given: ServingConfig, served: SessionPlan) -> tuple[int, str]:
    """The CPUs the streams may use in all, and how to say them: those this process may use,
    or fewer when ``given.cpus`` says so."""
    usable = usable_cpus(served)
    if given.cpus is not None and given.cpus < usable:
        return given.cpus, f"{_cpus(given.cpus)} given (ServingConfig.cpus)"
    return usable, f"{_cpus(usable)} this process may use"


def _cpus(count: int) -> str:
    return f"{count} CPU{'' if count == 1 else 's'}"


def _check_fits(given: ServingConfig, cpus: int, said: str) -> None:
    """Streams x threads given may not exceed the CPUs the streams may use."""
    streams, threads = given.streams, given.threads_per_stream
    if streams is not None and threads is not None and streams * threads > cpus:
        raise OptionError(
            f"serving: expected streams x threads_per_stream within the {said}, "
            f"got {streams} x {threads} = {streams * threads}"
        )


@attrs.frozen
class _Weighed:
    """One device as the stage weighs it: its plan and builder, layout, trials and state."""

    device: DevicePlan
    builder: StreamBuilder | None
    layout: Layout | None = None
    rate: float | None = None
    trials: tuple[Trial, ...] = ()
    state: str = "serving"

    def shown(self) -> DeviceServing:
        return DeviceServing(
            self.device.label, self.device.chain, self.layout, self.rate, self.state, self.trials
        )


def _checked(
    device: DevicePlan, origin: ResolvedCheckpoint, verify: bool | Tolerance | None
) -> tuple[StreamBuilder | None, str]:
    """Build and verify a device the build did not serve on: its builder, or why not used."""
    from ortplug.plugin_host.manager import resolve_plugin_host  # cumulative builds alone
    from ortplug.verification.verifier import Verifier

    try:
        build = create_planned(device.weights, device.plan, device.plan.options)
    except OrtplugError as exc:
        return None, f"not used: failed to build: {' '.join(str(exc).split())[:300]}"
    if device.on_cpu and device.plan.on_reference:
        return StreamBuilder(device, build.session), "serving"
    tolerance = verify if isinstance(verify, Tolerance) else None
    verifier = Verifier(origin, resolve_plugin_host(device.plan.plugins), tolerance)
    verdict = verifier.verdict(device.weights, device.plan, build.session)
    if not verdict.passed:
        return None, f"not used: rejected: {verdict.describe()}"
    return StreamBuilder(device, build.session), "serving"


@attrs.frozen
class _Batched:
    """How requests share runs: the batching (``None``: they run one by one), the line that says
    it, and what the server trusts from the start's check (the served device's row counts)."""

    batching: Batching | None
    line: str
    checks: RowChecks = attrs.field(factory=RowChecks)
    #: Why the start's check refused sharing runs (recorded: a later build needs no check).
    problem: str | None = None


def _one_by_one(problem: str) -> _Batched:
    """Requests run one by one because the row check refused sharing runs: said once."""
    warnings.warn(
        f"the throughput hint runs requests one by one: {problem}",
        ServingWarning,
        stacklevel=user_stacklevel(__file__),
    )
    return _Batched(None, f"requests run one by one: {problem}", problem=problem)


def _batching(
    session: Any,
    infos: tuple[Sequence[Any], Sequence[Any]],
    feed: Mapping[str, Any] | None,
    names: Sequence[str],
    largest: Callable[[Batching], int],
    label: str,
) -> _Batched:
    """The batching that serves: the model's, when its rows were proven independent on more
    rows than ``largest`` (the most rows a run may take) on ``session`` (device ``label``)."""
    found = batching_of(*infos)
    if isinstance(found, str):
        return _Batched(None, f"requests run one by one: {found}")
    if feed is None:
        return _Batched(None, "requests run one by one: no inputs to check a batched run's rows on")
    rows = largest(found) + 1
    try:
        checked = rows_checked(session, feed, names, found, rows)
        problem = checked.problem
    except Exception as exc:
        problem = f"a batched run failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    if problem is not None:
        return _one_by_one(problem)
    trusted = [(label, checked.group, count) for count in sorted(checked.counts)]
    checks = RowChecks(trusted, {(label, checked.group): checked.shapes})
    return _Batched(found, _batching_line(found, rows), checks)


def _batching_line(found: Batching, rows: int) -> str:
    if found.static is not None:
        return (
            f"requests fill the model's static batch of {found.static} rows (the last row pads "
            f"it; its rows checked independent on {found.static} varied rows)"
        )
    return (
        "concurrent requests of the same shapes share runs along the first dimension (rows "
        f"checked independent on {rows} varied rows; each row count re-checked on its first "
        "requests)"
    )


def _recorded_batching(
    infos: tuple[Sequence[Any], Sequence[Any]],
    problem: str | None,
    largest: Callable[[Batching], int],
) -> _Batched:
    """The batching of a recorded build: the start's check is the record's verdict on the same
    inputs; the server trusts no row count until it re-checked it on real requests."""
    found = batching_of(*infos)
    if isinstance(found, str):
        return _Batched(None, f"requests run one by one: {found}")
    if problem is not None:
        return _one_by_one(problem)
    return _Batched(found, _batching_line(found, largest(found) + 1))


def start_serving(
    *,
    hint: str,
    given: ServingConfig,
    origin: ResolvedCheckpoint,
    served: SessionPlan,
    session: Any,
    others: Callable[[], list[SessionPlan]] | None,
    infos: tuple[Sequence[Any], Sequence[Any]],
    session_options: SessionOptionsConfig | None,
    verify: bool | Tolerance | None,
    measure_wanted: bool,
    given_inputs: Mapping[str, Any] | None = None,
) -> tuple[Server, ServingReport]:
    """The server of a throughput build and its report (see the module docstring).

    ``session`` is the served plan's session (its stream sessions are built beside it);
    ``others`` the policy's choices, prepared (asked for only by the cumulative hint;
    ``None``: only the served device is used);
    ``infos`` the model's inputs and outputs (:class:`~ortplug.session.introspection.ValueInfo`);
    ``given_inputs`` the caller's real arrays (:mod:`.inputs`).
    """
    given_inputs = dict(given_inputs or {})
    budget, said = _cpu_budget(given, served)
    _check_fits(given, budget, said)
    cumulative = hint == "cumulative_throughput"
    plans = [] if others is None or not cumulative else others()
    devices = device_plans(served, [p for p in plans if p is not served], origin, every=cumulative)
    weighed: list[_Weighed] = []
    for device in devices:
        if device.plan is served:
            weighed.append(_Weighed(device, StreamBuilder(device, session)))
            continue
        builder, state = _checked(device, origin, verify)
        weighed.append(_Weighed(device, builder, state=state))
    names = [info.name for info in infos[1]]
    usable = [w for w in weighed if w.builder is not None]

    def largest(found: Batching) -> int:
        limit = max(batch_limit(found, cpu=w.device.on_cpu) for w in usable)
        return limit if given.max_batch is None else min(limit, given.max_batch)

    labels = tuple((w.device.label, w.device.chain) for w in usable)
    measuring = measure_wanted and not given.complete
    recorded = record.lookup(origin, served.host, hint, given, labels) if measuring else None
    samples = _samples(origin)
    extra = origin.metadata.extra
    traffic = _recorded_inputs(recorded, session, extra, given_inputs, samples, infos)
    if traffic is None:
        recorded = None
        traffic = _probed(session, extra, given_inputs, samples)
    if recorded is not None:
        batched = _recorded_batching(infos, recorded.rows_problem, largest)
    else:
        feed = None if traffic is None else traffic.feed
        label = weighed[0].device.label
        batched = _batching(session, infos, feed, names, largest, label)
    batching = batched.batching
    accelerators = sum(1 for w in usable if not w.device.on_cpu)
    cpus = max(1, budget - accelerators)
    degenerate = traffic is not None and traffic.degenerate
    if degenerate and measuring and recorded is None:
        assert traffic is not None
        warnings.warn(
            f"the throughput hint does not measure its layout on generated inputs of degenerate "
            f"sizes ({traffic.describe()}), which stand for no real request: it serves the "
            "defaults; give real inputs (samples/<input>.npy beside the model, "
            "verify=Verification(inputs=...), ortplug bench --callers --input)",
            ServingWarning,
            stacklevel=user_stacklevel(__file__),
        )
    if recorded is not None:
        weighed = _from_record(weighed, recorded.report)
        source = recorded.report.source
    elif measuring and traffic is not None and not degenerate:
        started = time.perf_counter()
        bounded = budget < usable_cpus(served)
        weighed = [
            _measured(w, given, batching, traffic.feed, names, cpus=cpus, bounded=bounded)
            for w in weighed
        ]
        seconds = time.perf_counter() - started
        source = (
            f"measured on this model's first {hint} build here ({seconds:.1f} s, "
            f"{CALLERS} concurrent callers)"
        )
    else:
        weighed = [_defaulted(w, given, batching, cpus) for w in weighed]
        source = _unmeasured(given, measure_wanted, traffic)
    weighed = _shared_out(weighed)
    measured = source.startswith(("measured", "recorded"))
    shown = None if traffic is None else traffic.describe()
    if shown is not None and degenerate and not measured:
        shown += " (degenerate sizes: not measured on)"
    latency = None if recorded is None else recorded.report.latency
    report = ServingReport(hint, tuple(w.shown() for w in weighed), batched.line, source,
                           CALLERS if measured else None, shown, latency)  # fmt: skip
    if recorded is None and source.startswith("measured") and traffic is not None:
        kept = record.Recorded(report, traffic.digest, dict(traffic.shapes), batched.problem)
        _save(origin, served, given, kept)
    serving = [w for w in weighed if w.state == "serving" and w.builder is not None and w.layout]
    later = _built_later(serving) if recorded is not None else None
    server = Server(
        [
            Device(
                w.device.label,
                later.now if later is not None else w.builder.streams(w.layout),
                w.layout.max_batch,
                w.layout.max_delay_ms / 1e3,
            )
            for w in serving
            if w.builder is not None and w.layout is not None
        ],
        batching,
        batched.checks,
    )
    one = len(serving) == 1 and serving[0].device.plan.plugins is not None
    watched = serving[0] if one and serving[0].builder and serving[0].builder.built() else None
    if given.watch and measuring and measured and watched is not None and traffic is not None:
        keep = _keeper(origin, served, given, traffic, batched.problem, report, server)
        _watch(server, watched, report, keep, build_first=later is not None)
    elif later is not None:
        _restream_behind(server, later)
    else:
        for w in weighed:
            if w.builder is not None:
                w.builder.release()
    return server, report


def _watch(
    server: Server,
    watched: _Weighed,
    report: ServingReport,
    keep: Callable[[Layout, str | None, str], None],
    *,
    build_first: bool,
) -> None:
    """Watch the one device's layout against the latency path (:mod:`.watch`), serving the
    latency path from the start when the record says none beat it (said once), and a lone
    request on it from the start (:meth:`~.server.Server.serve_lone_requests`). The latency
    path's runs of a provider that does not declare concurrent runs take turns, as the latency
    hint's do."""
    builder, layout, plugins = watched.builder, watched.layout, watched.device.plan.plugins
    assert builder is not None and layout is not None and plugins is not None  # it serves
    built = builder.built()
    assert built is not None  # the session the build made (checked before)
    latency = Stream(serialised(built[0].session, plugins), built[0].options)
    server.serve_lone_requests(server.devices[0], latency)  # with the session's own threads
    if report.latency is not None:
        server.serve_latency(server.devices[0], latency)
        warnings.warn(
            f"the throughput hint serves the latency path (recorded: {report.latency}); "
            "compared again on the first seconds of traffic",
            ServingWarning,
            stacklevel=user_stacklevel(__file__),
        )
    others = alternatives(watched.trials, layout)
    server.watch = Watch(server, builder, layout, others, latency, keep,
                         on_latency=report.latency is not None, build_first=build_first)  # fmt: skip
    server.behind("ortplug-serving-watch", server.watch.run)


def _keeper(
    origin: ResolvedCheckpoint,
    served: SessionPlan,
    given: ServingConfig,
    traffic: TrafficInputs,
    problem: str | None,
    report: ServingReport,
    server: Server,
) -> Callable[[Layout, str | None, str], None]:
    """What the watch calls when live traffic changed what serves: the report (the server's
    and the record's) says the layout kept and whether the latency path serves."""
    label = server.devices[0].label

    def keep(layout: Layout, latency: str | None, line: str) -> None:
        devices = tuple(attrs.evolve(d, layout=layout) if d.label == label else d
                        for d in report.devices)  # fmt: skip
        changed = attrs.evolve(report, devices=devices, source=_clip(f"watched: {line}"),
                               latency=None if latency is None else _clip(latency))  # fmt: skip
        server.report = changed
        kept = record.Recorded(changed, traffic.digest, dict(traffic.shapes), problem)
        _save(origin, served, given, kept)

    return keep


def _clip(text: str) -> str:
    """``text`` within a record's line of text."""
    return text if len(text) <= _LINE else text[: _LINE - 3] + "..."


def _samples(origin: ResolvedCheckpoint) -> dict[str, Any]:
    """The checkpoint's samples (none when its folder is unreadable: the build said so)."""
    try:
        return carried_samples(origin)
    except OrtplugError:
        return {}


def _probed(
    session: Any,
    extra: Mapping[str, object],
    given_inputs: Mapping[str, Any],
    samples: Mapping[str, Any],
) -> TrafficInputs | None:
    try:
        return inputs.probed(session, extra, given_inputs, samples)
    except OrtplugError:
        return None


def _recorded_inputs(
    recorded: record.Recorded | None,
    session: Any,
    extra: Mapping[str, object],
    given_inputs: Mapping[str, Any],
    samples: Mapping[str, Any],
    infos: tuple[Sequence[Any], Sequence[Any]],
) -> TrafficInputs | None:
    """The inputs ``recorded`` was measured on, made without running the model: the given
    arrays and samples, the rest generated at the recorded shapes (``None``: no record, or
    it was measured on other inputs)."""
    if recorded is None:
        return None
    input_names = [info.name for info in infos[0]]
    found = inputs.known(input_names, given_inputs, samples) or inputs.regenerated(
        session, extra, given_inputs, samples, recorded.shapes
    )
    return found if found is not None and found.digest == recorded.digest else None


@attrs.frozen
class _Later:
    """A recorded layout whose sessions are built behind the first requests: its device's
    builder and layout, and the session built already, as the one stream serving meanwhile."""

    builder: StreamBuilder
    layout: Layout
    now: list[Stream]


def _built_later(serving: list[_Weighed]) -> _Later | None:
    """A :class:`_Later` for one device whose recorded layout needs sessions not built yet."""
    if len(serving) != 1:
        return None
    builder, layout = serving[0].builder, serving[0].layout
    if builder is None or layout is None or (layout.streams == 1 and layout.threads is None):
        return None  # the session built already is the layout's
    now = builder.built()
    return None if now is None else _Later(builder, layout, now)


def _restream_behind(server: Server, later: _Later) -> None:
    """Build the recorded layout's sessions on a thread of their own once a request was served
    (not beside the first one), then serve on them: the build returns at a latency build's cost,
    its first requests served by the session built."""
    device, builder, layout = server.devices[0], later.builder, later.layout

    def build() -> None:
        try:
            if not server.first_served():
                return
            streams = builder.streams(layout)
        except Exception as exc:  # the session built serves on (the report says why)
            server.restream_failed = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            return
        finally:
            builder.release()
        server.restream(device, streams)

    server.behind("ortplug-layout-build", build)


def _from_record(weighed: list[_Weighed], report: ServingReport) -> list[_Weighed]:
    by_label = {device.label: device for device in report.devices}
    out = []
    for w in weighed:
        shown = by_label.get(w.device.label)
        if w.builder is None or shown is None:
            out.append(w)
            continue
        out.append(attrs.evolve(w, layout=shown.layout, rate=shown.requests_per_s,
                                trials=shown.trials, state=shown.state))  # fmt: skip
    return out


def _measured(
    w: _Weighed,
    given: ServingConfig,
    batching: Batching | None,
    feed: Mapping[str, Any],
    names: Sequence[str],
    *,
    cpus: int,
    bounded: bool,
) -> _Weighed:
    """``w`` measured (``bounded``: a CPU budget under the process's is given)."""
    if w.builder is None:
        return w
    cpu = w.device.on_cpu
    limit = batch_limit(batching, cpu=cpu)
    candidates = candidate_layouts(given, cpu=cpu, cpus=cpus, batch_limit=limit,
                                   own_threads=not bounded)  # fmt: skip
    try:
        trials = measure(w.builder.streams, candidates, batching, feed, names,
                         batch_limit=limit, free=given)  # fmt: skip
    except Exception as exc:
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return attrs.evolve(w, state=f"not used: failed while measured ({cause})")
    best = best_of(trials)
    return attrs.evolve(w, layout=best.layout, rate=best.requests_per_s, trials=tuple(trials))


def _defaulted(w: _Weighed, given: ServingConfig, batching: Batching | None, cpus: int) -> _Weighed:
    if w.builder is None:
        return w
    cpu = w.device.on_cpu
    limit = batch_limit(batching, cpu=cpu)
    return attrs.evolve(w, layout=default_layout(given, cpu=cpu, cpus=cpus, batch_limit=limit))


def _unmeasured(given: ServingConfig, wanted: bool, traffic: TrafficInputs | None) -> str:
    if given.complete:
        return "as given (ServingConfig)"
    if not wanted:
        return "defaults, not measured (measure=False or ORTPLUG_MEASURE=0)"
    if traffic is not None:
        return "defaults, not measured (only generated inputs of degenerate sizes ran)"
    return "defaults, not measured (no inputs could be generated for the model)"


def _shared_out(weighed: list[_Weighed]) -> list[_Weighed]:
    """Devices under :data:`MIN_SHARE` of the fastest one's rate serve nothing."""
    rates = [w.rate for w in weighed if w.state == "serving" and w.rate]
    if len(rates) < 2:
        return weighed
    fastest = max(rates)
    return [
        attrs.evolve(
            w,
            state=f"not used: {w.rate:.0f} requests/s, under {MIN_SHARE:.0%} of the fastest "
            f"device's {fastest:.0f}",
        )
        if w.state == "serving" and w.rate is not None and w.rate < MIN_SHARE * fastest
        else w
        for w in weighed
    ]


def _save(
    origin: ResolvedCheckpoint, served: SessionPlan, given: ServingConfig, kept: record.Recorded
) -> None:
    try:
        record.save(origin, served.host, given, kept)
    except CacheError as exc:
        warnings.warn(
            f"the measured serving layout is not recorded: {exc}",
            OrtplugCacheWarning,
            stacklevel=user_stacklevel(__file__),
        )


def serve(start: ServingStart) -> Server:
    """The :data:`~ortplug.backend.dispatch.Starter` of the throughput hints (entry-point group
    ``ortplug.hints``)."""
    if start.config is not None and not isinstance(start.config, ServingConfig):
        raise OptionTypeError(
            f"serving: expected a ServingConfig, got {type(start.config).__name__}"
        )
    server, report = start_serving(
        hint=start.hint,
        given=start.config or ServingConfig(),
        origin=start.result.origin,
        served=start.result.plan,
        session=start.session,
        others=start.others,
        infos=(start.inputs, start.outputs),
        session_options=start.session_options,
        verify=start.verify,
        measure_wanted=start.measure,
        given_inputs=start.given_inputs,
    )
    server.report = report
    return server
