"""Per-step spans of a training loop, for otelcol-gpu.

One ``train.step`` span per rank per step, with the phase durations as
attributes and the ids of the training-script contract
(docs/training-scripts.md), so the spans of every rank of a step land in one
trace without any rank talking to another::

    import otelcol_gpu_step

    steps = otelcol_gpu_step.Steps()          # job, attempt, rank from the environment
    steps.attach_ddp(model)                   # DDP: backward is compute, the all-reduce wait apart
    for n, batch in enumerate(loader):
        with steps.step(n):
            with steps.phase("dataload"):
                batch = next(it)
            with steps.phase("forward"):
                loss = model(batch)
            with steps.phase("backward"):
                loss.backward()
            with steps.phase("optimizer"):
                opt.step()
            steps.record(tokens=4096, loss=last_loss)

Phases are the rank's own compute. Under DistributedDataParallel,
``attach_ddp(model)`` (or ``model.register_comm_hook(None, steps.comm_hook)``)
marks each gradient bucket ready: the backward's compute ends at the last
bucket, and the rest of the backward, spent waiting for the all-reduce the
compute did not hide, is sent as ``training.phase.comm_wait_ns``. Other
frameworks use ``steps.comm_wait()``, ``steps.compute_done()`` or
``steps.record_comm_wait(ns)``.

A script that times its own steps (a Lightning callback, a replay) hands each
finished step over with ``steps.record_step(n, start_ns, end_ns, phases_ns={...})``.

Standard library only (Python >= 3.8). The training loop is never blocked and
never sees an exception from this module: records go into a bounded queue that
a background thread posts as OTLP/HTTP JSON; when the queue is full or the
agent is down, records are dropped and counted (``Steps.dropped``).

``python3 otelcol_gpu_step.py replay`` reads step records as JSON lines on
stdin and sends them the same way (``replay --help``).
"""

import argparse
import atexit
import hashlib
import http.client
import importlib
import importlib.util
import json
import logging
import math
import operator
import os
import queue
import re
import socket
import sys
import threading
import time
import urllib.parse

__all__ = ["Steps", "trace_id", "rank_span_id", "root_span_id", "PHASES", "COMM_WAIT"]
__version__ = "0.1.0"

_log = logging.getLogger("otelcol_gpu_step")

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
SPAN_NAME = "train.step"
PHASES = ("dataload", "forward", "backward", "optimizer")
# training.phase.comm_wait_ns: the step's exposed communication wait. Its
# presence (0 included) declares the phases compute-only.
COMM_WAIT = "comm_wait"
_DEFAULT_DDP_HOOK = "torch.distributed.algorithms.ddp_comm_hooks.default_hooks"

_SPAN_KIND_INTERNAL = 1
_STATUS_ERROR = 2
_SEVERITY_INFO = 9
_PHASE_NAME = re.compile(r"^[a-z0-9_]+$")
_UUID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD_IN_CGROUP = re.compile(r"pod(" + _UUID + r")")
_POD_IN_MOUNTS = re.compile(r"/pods/(" + _UUID + r")/")
_WAKE = object()  # queued by close() so the sender stops waiting at once


# --- The contract's ids (docs/training-scripts.md) -------------------------


def _prefix(job_id, attempt, step):
    return "%s\x00%d\x00%d" % (job_id, int(attempt), int(step))


def _sha256_hex(text, nbytes):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[: 2 * nbytes]


def trace_id(job_id, attempt, step):
    """Hex trace id of a step: SHA-256(job + "\\0" + attempt + "\\0" + step)[:16]."""
    return _sha256_hex(_prefix(job_id, attempt, step), 16)


def rank_span_id(job_id, attempt, step, rank):
    """Hex span id of a rank's step span: SHA-256(... + "\\0" + rank)[:8]."""
    return _sha256_hex(_prefix(job_id, attempt, step) + "\x00%d" % int(rank), 8)


def root_span_id(job_id, attempt, step):
    """Hex span id of the step's root (the rank spans' parent): SHA-256(... + "\\0root")[:8]."""
    return _sha256_hex(_prefix(job_id, attempt, step) + "\x00root", 8)


# --- Reading the job from the environment ----------------------------------


def _env(*names):
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _env_int(*names):
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                _log.warning("otelcol_gpu_step: %s=%r is not an integer; ignored", name, value)
    return None


def _otel_resource_attributes():
    """OTEL_RESOURCE_ATTRIBUTES as a dict (key1=value1,key2=value2, percent-encoded)."""
    out = {}
    for item in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return out


def _job_id_from_environment(otel_attrs):
    explicit = otel_attrs.get("training.job.id")
    if explicit:
        return explicit
    run_id = _env("TORCHELASTIC_RUN_ID")
    # torchrun's default --rdzv-id is the literal "none": every job would share it.
    if run_id and run_id.lower() != "none":
        return run_id
    return _env("SLURM_JOB_ID")


def _gpu_uuid_from_environment():
    """The GPU's UUID when the container was given exactly one GPU by UUID."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        devices = [d.strip() for d in os.environ.get(name, "").split(",") if d.strip()]
        if len(devices) == 1 and devices[0].startswith(("GPU-", "MIG-")):
            return devices[0]
    return None


def _k8s_pod_uid_from_environment():
    value = _env("K8S_POD_UID", "POD_UID")
    if value:
        return value
    for path, pattern in (("/proc/self/cgroup", _POD_IN_CGROUP), ("/proc/self/mountinfo", _POD_IN_MOUNTS)):
        try:
            with open(path, "r") as f:
                match = pattern.search(f.read(1 << 20))
        except OSError:
            continue
        if match:
            return match.group(1).replace("_", "-")
    return None


def _normalise_gpu_uuid(value):
    text = str(value)
    if text.startswith(("GPU-", "MIG-")):
        return text
    return "GPU-" + text


def _remove(items, item):
    """Removes item (by identity) from a list, the last occurrence first."""
    for i in range(len(items) - 1, -1, -1):
        if items[i] is item:
            del items[i]
            return


def _events_done(step):
    """Whether every CUDA event of the step completed (query(): never waits).
    Events recorded earlier on the stream complete first; the ends are enough,
    but a wait's end may sit on another stream."""
    return (all(run.end.query() for run in step.gpu_events)
            and all(end.query() for run in step.gpu_events for _, end in run.waits)
            and all(end.query() for _, end in step.gpu_waits))


# --- OTLP JSON encoding (protobuf JSON mapping) ------------------------------


def _any_value(value):
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        if math.isinf(value):
            return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(mapping):
    return [{"key": k, "value": _any_value(v)} for k, v in mapping.items() if v is not None]


# --- The step being measured ------------------------------------------------


def _integer(what, value):
    """value as an int: ints and numpy-style integers; not bools, floats or strings."""
    if isinstance(value, bool):
        raise TypeError("%s must be an int, not a bool" % what)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))


def _add_record(step, tokens, loss, flops, attributes):
    """What record() and record_step() add to a step's attributes."""
    if tokens is not None:
        step.attrs["training.tokens"] = int(tokens)
    if loss is not None:
        step.attrs["training.loss"] = float(loss)
    if flops is not None:
        step.attrs["training.flops"] = float(flops)
    if attributes:
        for key, value in attributes.items():
            step.attrs[str(key)] = value


class _PhaseRun(object):
    """One entry into a phase: its start and end (CUDA events, or perf_counter
    ns), the latest point at which its compute was done (the last gradient
    bucket ready, ``Steps.compute_done()``) and the communication waits timed
    inside it (``Steps.comm_wait()``). Everything from the compute's end to the
    phase's end, and every timed wait, is communication wait, not compute."""

    __slots__ = ("name", "start", "end", "compute_done", "waits", "wait_ns")

    def __init__(self, name, start):
        self.name = name
        self.start = start
        self.end = None
        self.compute_done = None  # CUDA event or perf ns of the last compute_done()
        self.waits = []  # (start event, end event) of comm_wait() regions (CUDA)
        self.wait_ns = 0  # comm_wait() regions on the CPU clock

    def declared(self):
        return self.compute_done is not None or bool(self.waits) or self.wait_ns > 0


def _elapsed_ns(start, end):
    """Nanoseconds between two completed CUDA events, >= 0."""
    return max(0, int(round(start.elapsed_time(end) * 1e6)))


class _Step(object):
    __slots__ = ("n", "start_unix_ns", "start_perf_ns", "end_unix_ns", "phase_ns", "gpu_events",
                 "phase_windows", "attrs", "error", "open_phases", "gpu_waits")

    def __init__(self, n):
        self.n = n
        self.start_unix_ns = time.time_ns()
        self.start_perf_ns = time.perf_counter_ns()
        self.end_unix_ns = 0
        self.phase_ns = {}  # name -> ns (CPU timing, or GPU timing once resolved)
        self.gpu_events = []  # _PhaseRun with CUDA events, until resolved
        self.gpu_waits = []  # (start, end) CUDA events of comm_wait() outside any phase
        self.open_phases = []  # _PhaseRun entered and not left yet, innermost last
        self.phase_windows = []  # (name, start unix ns, end unix ns) for phase child spans
        self.attrs = {}
        self.error = None


class _StepScope(object):
    """What ``Steps.step(n)`` returns: a context manager around one step."""

    __slots__ = ("_steps", "_n", "_started")

    def __init__(self, steps, n):
        self._steps = steps
        self._n = n
        self._started = False

    def __enter__(self):
        self._started = self._steps._begin_step(self._n)
        return self._steps

    def __exit__(self, exc_type, exc, tb):
        if self._started:
            self._steps._end_step(exc_type)
        return False  # the training loop's own exceptions go on


class _CommWaitScope(object):
    """What ``Steps.comm_wait()`` returns."""

    __slots__ = ("_steps", "_token")

    def __init__(self, steps):
        self._steps = steps
        self._token = None

    def __enter__(self):
        self._token = self._steps._begin_comm_wait()
        return self._steps

    def __exit__(self, exc_type, exc, tb):
        self._steps._end_comm_wait(self._token)
        return False


class _PhaseScope(object):
    """What ``Steps.phase(name)`` returns."""

    __slots__ = ("_steps", "_name", "_token")

    def __init__(self, steps, name):
        self._steps = steps
        self._name = name
        self._token = None

    def __enter__(self):
        self._token = self._steps._begin_phase(self._name)
        return self._steps

    def __exit__(self, exc_type, exc, tb):
        self._steps._end_phase(self._name, self._token)
        return False


class Steps(object):
    """Measures training steps and sends one record per step to the agent.

    Every argument left as None is read from the environment:

    - ``job_id``: ``training.job.id`` in OTEL_RESOURCE_ATTRIBUTES,
      TORCHELASTIC_RUN_ID (unless torchrun's default "none"), SLURM_JOB_ID.
      The same value on every node of the job. Without one the object stays
      disabled (``enabled`` is False) rather than invent a per-node id.
    - ``attempt``: TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT, else 0.
    - ``rank`` / ``local_rank`` / ``world_size``: RANK / LOCAL_RANK /
      WORLD_SIZE, else SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, else 0, 0, 1.
    - ``service_name``: OTEL_SERVICE_NAME, else "unknown_service:python".
    - ``gpu_uuid``: torch.cuda.get_device_properties(current device).uuid at
      the first step when torch with CUDA is present, else a single GPU UUID
      in CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES.
    - ``k8s_pod_uid``: K8S_POD_UID / POD_UID (downward API), else the pod
      directory in /proc/self/cgroup or /proc/self/mountinfo.
    - ``endpoint``: OTEL_EXPORTER_OTLP_ENDPOINT, else http://127.0.0.1:4318.
    - ``host_name``: socket.gethostname(). Pass it when the process speaks
      for another host (a replay of several simulated nodes): it is the
      records' ``host.name`` and names the flight-recorder dumps.

    ``mode`` is "spans" (POST /v1/traces) or "logs" (one log record per step
    on /v1/logs, with ``duration_ns``). ``timing`` is "auto" (CUDA events when
    torch with CUDA is importable, else CPU), "cuda" or "cpu".
    ``phase_spans_every=N`` adds a child span per phase on steps divisible by
    N (0: never). ``dump_flight_recorder_every=N`` asks PyTorch for a NCCL
    flight-recorder dump every N steps into ``dump_dir``.

    Phases are the rank's own compute (docs/training-scripts.md): under DDP,
    ``attach_ddp(model)`` (or ``model.register_comm_hook(None,
    steps.comm_hook)``) ends the backward's compute at the last gradient
    bucket's ready event and reports the rest of the backward, spent waiting
    for the all-reduce, as ``training.phase.comm_wait_ns``; ``comm_wait()``,
    ``compute_done()`` and ``record_comm_wait(ns)`` do the same for other
    frameworks. ``compute_only_phases=True`` declares phases that are
    compute-only by construction (a script that times them itself, a job
    without data parallelism): every step then carries comm_wait_ns, 0 when
    nothing else was recorded.

    Use from the training thread only (the DDP hook and ``compute_done()``
    may also run on autograd's threads, inside the training thread's
    ``loss.backward()``); ``close()`` (also run at exit) sends
    what is queued, waiting at most ``close_timeout`` seconds.
    """

    def __init__(self, job_id=None, attempt=None, rank=None, local_rank=None, world_size=None, *,
                 service_name=None, gpu_uuid=None, k8s_pod_uid=None,
                 pp_stage=None, dp_replica=None, tp_rank=None, resource_attributes=None,
                 endpoint=None, mode="spans", timing="auto", phase_spans_every=0,
                 max_queue=2048, max_batch=256, flush_interval=1.0, timeout=1.0, close_timeout=2.0,
                 max_pending_gpu_steps=64, dump_flight_recorder_every=0, dump_dir=None,
                 register_atexit=True, host_name=None, compute_only_phases=False):
        self._lock = threading.Lock()  # guards the counters and the warn-once set
        self._warned = set()
        self._dropped = 0
        self._sent = 0
        self._dumps = 0
        self._dump_errors = 0
        self._closed = False
        self._pid = os.getpid()
        self._current = None
        self._pending_gpu = []  # steps whose CUDA events have not completed yet
        self._torch = None
        self._timing_resolved = False
        self._use_cuda = False
        self._sender = None
        self._dumper = None
        # Once the script has shown that its phases are compute-only (a
        # bucket-ready mark inside a phase, a timed comm wait, or the
        # constructor says so), every later step carries comm_wait_ns.
        self._comm_declared = bool(compute_only_phases)
        self._ddp_default_hook = None

        if mode not in ("spans", "logs"):
            raise ValueError("otelcol_gpu_step: mode must be 'spans' or 'logs', not %r" % (mode,))
        if timing not in ("auto", "cuda", "cpu"):
            raise ValueError("otelcol_gpu_step: timing must be 'auto', 'cuda' or 'cpu', not %r" % (timing,))
        self.mode = mode
        self._timing = timing
        self._phase_spans_every = max(0, int(phase_spans_every or 0))
        self._max_batch = max(1, int(max_batch))
        self._flush_interval = max(0.001, float(flush_interval))
        self._timeout = max(0.001, float(timeout))
        self._close_timeout = max(0.0, float(close_timeout))
        self._max_pending_gpu = max(1, int(max_pending_gpu_steps))
        self._dump_every = max(0, int(dump_flight_recorder_every or 0))
        self._dump_dir = dump_dir or os.path.dirname(
            os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or "/tmp/nccl_trace_rank_") or "."
        self._queue = queue.Queue(maxsize=max(1, int(max_queue)))

        otel_attrs = _otel_resource_attributes()
        self.job_id = str(job_id) if job_id is not None else _job_id_from_environment(otel_attrs)
        self.attempt = int(attempt) if attempt is not None else (
            _env_int("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT") or 0)
        self.rank = int(rank) if rank is not None else (_env_int("RANK", "SLURM_PROCID") or 0)
        local_rank = int(local_rank) if local_rank is not None else (
            _env_int("LOCAL_RANK", "SLURM_LOCALID") or 0)
        world_size = int(world_size) if world_size is not None else (
            _env_int("WORLD_SIZE", "SLURM_NTASKS") or 1)
        self.host_name = str(host_name) if host_name else socket.gethostname()

        base = endpoint or _env("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = base.rstrip("/")
        self._path = "/v1/traces" if mode == "spans" else "/v1/logs"

        resource = dict(otel_attrs)
        resource.update(resource_attributes or {})
        resource.update({
            "service.name": service_name or _env("OTEL_SERVICE_NAME") or resource.get("service.name")
            or "unknown_service:python",
            "training.job.id": self.job_id,
            "training.attempt": self.attempt,
            "training.rank": self.rank,
            "training.local_rank": local_rank,
            "training.world_size": world_size,
            "host.name": self.host_name,
            "process.pid": self._pid,
            "telemetry.sdk.name": "otelcol_gpu_step",
            "telemetry.sdk.language": "python",
            "telemetry.sdk.version": __version__,
        })
        for key, value in (("training.pp_stage", pp_stage), ("training.dp_replica", dp_replica),
                           ("training.tp_rank", tp_rank)):
            if value is not None:
                resource[key] = int(value)
        pod_uid = k8s_pod_uid or resource.get("k8s.pod.uid") or _k8s_pod_uid_from_environment()
        if pod_uid:
            resource["k8s.pod.uid"] = str(pod_uid)
        uuid = gpu_uuid or resource.get("gpu.uuid")
        if uuid:
            resource["gpu.uuid"] = _normalise_gpu_uuid(uuid)
        self._resource = resource
        self._resource_json = None  # built when the first record goes out (gpu.uuid may come late)

        self.enabled = bool(self.job_id)
        if not self.enabled:
            _log.warning("otelcol_gpu_step: no job id (pass job_id=, or set TORCHELASTIC_RUN_ID via "
                         "torchrun --rdzv-id, or SLURM_JOB_ID); step records are not sent")
        if register_atexit:
            atexit.register(self.close)

    # --- public API -----------------------------------------------------

    def step(self, n):
        """Context manager measuring step ``n`` (an int; the same on every rank)."""
        return _StepScope(self, n)

    def phase(self, name):
        """Context manager measuring a phase of the current step.

        The contract's phases are "dataload", "forward", "backward" and
        "optimizer" (attribute ``training.phase.<name>_ns``); a phase entered
        several times in one step (micro-batches) adds up. A phase is the
        rank's own compute: what ``compute_done()`` (the DDP hook) and
        ``comm_wait()`` mark inside it as waiting for communication goes to
        ``training.phase.comm_wait_ns`` instead. ``phase("comm_wait")`` is
        ``comm_wait()``.
        """
        if name == COMM_WAIT:
            return _CommWaitScope(self)
        return _PhaseScope(self, name)

    def comm_wait(self):
        """Context manager around code that blocks on communication the compute
        did not hide (``work.wait()`` of an async all-reduce, a pipeline
        send/recv): its time goes to ``training.phase.comm_wait_ns`` and, when
        it runs inside a phase, out of that phase. Timed like the phases (CUDA
        events on the current stream, else the CPU clock)."""
        return _CommWaitScope(self)

    def record_comm_wait(self, ns):
        """Adds ``ns`` nanoseconds (an int >= 0) the caller measured to the
        current step's ``training.phase.comm_wait_ns``. The phases are not
        touched: the caller's phases must then be compute-only. Never raises."""
        try:
            step = self._current
            if step is None:
                self._warn_once("comm-wait-outside", "record_comm_wait() outside a step is ignored")
                return
            ns = _integer("ns", ns)
            if ns < 0:
                raise ValueError("ns = %d is negative" % ns)
            step.phase_ns[COMM_WAIT] = step.phase_ns.get(COMM_WAIT, 0) + ns
            self._comm_declared = True
        except Exception as err:
            self._warn_once("record-comm-wait", "record_comm_wait(%r) ignored: %r", ns, err)

    def compute_done(self):
        """Marks that the compute of the innermost open phase has produced what
        communication waits for (a gradient bucket is ready): a CUDA event on
        the current stream, else the CPU clock. The phase's compute ends at its
        last mark; from there to the phase's end is comm wait. The DDP hook
        calls it for every bucket; under FSDP or another framework call it
        from a hook that runs when the backward's last gradient is computed.
        May run on autograd's threads. Never raises."""
        try:
            step = self._current
            run = step.open_phases[-1] if step is not None and step.open_phases else None
            if run is None:
                self._warn_once("compute-done-outside",
                                "compute_done() (a DDP bucket ready) outside a phase is ignored: "
                                "put loss.backward() inside steps.phase('backward')")
                return
            if self._use_cuda:
                event = self._torch.cuda.Event(enable_timing=True)
                event.record()
                run.compute_done = event
            else:
                run.compute_done = time.perf_counter_ns()
            self._comm_declared = True
        except Exception as err:
            self._warn_once("compute-done", "compute_done() failed: %r", err)

    def comm_hook(self, state, bucket):
        """A DDP communication hook: ``model.register_comm_hook(None,
        steps.comm_hook)``. It marks the bucket ready (``compute_done()``) and
        runs PyTorch's default all-reduce hook (``state`` is its process
        group, None for the default group). ``attach_ddp()`` wraps another
        hook."""
        self.compute_done()
        hook = self._ddp_default_hook
        if hook is None:
            hook = importlib.import_module(_DEFAULT_DDP_HOOK).allreduce_hook
            self._ddp_default_hook = hook
        return hook(state, bucket)

    def attach_ddp(self, model, state=None, hook=None):
        """Registers a communication hook on a DistributedDataParallel
        ``model`` (before its first forward) that marks each gradient bucket
        ready and then runs ``hook(state, bucket)`` (default: PyTorch's
        all-reduce hook, ``state`` its process group). The step's backward is
        then its compute up to the last bucket's ready event, and the rest of
        the backward (waiting for the all-reduce it could not hide) is
        ``training.phase.comm_wait_ns``. Returns the model. Never raises: a
        model that refuses the hook is logged and left as it was."""
        if hook is None:
            wrapped = self.comm_hook
        else:
            def wrapped(hook_state, bucket):
                self.compute_done()
                return hook(hook_state, bucket)
        try:
            model.register_comm_hook(state, wrapped)
        except Exception as err:
            _log.warning("otelcol_gpu_step: attach_ddp(): the model refused the communication hook (%r); "
                         "backward_ns includes the all-reduce wait", err)
        return model

    def record(self, tokens=None, loss=None, flops=None, attributes=None):
        """Adds ``training.tokens``, ``training.loss`` (NaN allowed), ``training.flops``
        and any other attributes to the current step.

        Pass Python numbers: converting a CUDA tensor here would wait for the GPU.
        """
        try:
            step = self._current
            if step is None:
                self._warn_once("record", "record() outside a step is ignored")
                return
            _add_record(step, tokens, loss, flops, attributes)
        except Exception as err:  # never let telemetry break training
            self._warn_once("record-error", "record() failed: %r", err)

    def record_step(self, n, start_ns, end_ns, phases_ns=None, tokens=None, loss=None, flops=None,
                    attributes=None, error=None):
        """Sends one step the caller timed itself (a Lightning callback, a replay).

        ``n`` is the step (an int), ``start_ns`` / ``end_ns`` its unix times in
        nanoseconds (ints, ``time.time_ns()``), ``phases_ns`` a dict of phase
        name -> duration in ns (``training.phase.<name>_ns``, as ``phase()``;
        the rank's own compute, with the step's exposed communication wait as
        ``"comm_wait"``),
        ``tokens`` / ``loss`` / ``flops`` / ``attributes`` as ``record()`` and
        ``error`` an error type (the span gets status Error and
        ``error.type``). The record is the one ``step(n)`` would send, with the
        times exactly as given; it has no phase child spans.

        It may be called inside an open ``step()``: the step being measured is
        not touched. A record that is not valid (end before start, a step or
        time that is not an int, a negative duration, a bad phase name) is not
        sent: it is counted in ``dropped`` with one warning. Never raises.
        """
        try:
            step = self._finished_step(n, start_ns, end_ns, phases_ns, error)
        except (TypeError, ValueError, AttributeError) as err:
            self._count_dropped(1, "invalid record_step(): %s" % (err,))
            return
        except Exception as err:
            self._count_dropped(1, "record_step() failed: %r" % (err,))
            return
        try:
            _add_record(step, tokens, loss, flops, attributes)
            if self._comm_declared:
                step.phase_ns.setdefault(COMM_WAIT, 0)
            if not self._timing_resolved:
                self._resolve_timing()  # gpu.uuid, as for step()
            self._enqueue(step)
            if self._dump_every and step.n % self._dump_every == 0:
                self._request_dump()
        except Exception as err:  # never let telemetry break training
            self._count_dropped(1, "record_step() failed: %r" % (err,))

    @property
    def dropped(self):
        """Records lost: queue full, agent down or refusing, close() timed out."""
        with self._lock:
            return self._dropped

    @property
    def sent(self):
        """Records the agent accepted."""
        with self._lock:
            return self._sent

    @property
    def dumps(self):
        """Flight-recorder dumps written."""
        with self._lock:
            return self._dumps

    def close(self, timeout=None):
        """Sends what is queued and stops the sender, within ``timeout`` seconds
        (default ``close_timeout``). Records not sent by then are dropped."""
        try:
            if self._closed or os.getpid() != self._pid:
                return
            bound = self._close_timeout if timeout is None else max(0.0, float(timeout))
            deadline = time.monotonic() + bound
            self._resolve_gpu_steps(deadline)  # waits for the GPU, within the bound
            self._closed = True
            if self._pending_gpu:
                self._count_dropped(len(self._pending_gpu), "close() timed out")
            self._pending_gpu = []
            sender = self._sender
            if sender is not None:
                sender.stop(deadline)
                try:
                    self._queue.put_nowait(_WAKE)
                except queue.Full:
                    pass
                sender.join(max(0.0, deadline - time.monotonic()) + 0.05)
            self._drop_queued()
            dumper = self._dumper
            if dumper is not None:
                dumper.stop()
                dumper.join(max(0.0, deadline - time.monotonic()))
        except Exception as err:
            self._warn_once("close-error", "close() failed: %r", err)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    # --- steps and phases -----------------------------------------------

    @staticmethod
    def _finished_step(n, start_ns, end_ns, phases_ns, error):
        """The _Step of record_step(); raises TypeError or ValueError for bad input."""
        n, start_ns, end_ns = _integer("step", n), _integer("start_ns", start_ns), _integer("end_ns", end_ns)
        if start_ns < 0 or end_ns < start_ns:
            raise ValueError("start_ns %d, end_ns %d: want 0 <= start_ns <= end_ns" % (start_ns, end_ns))
        phases = {}
        for name, ns in (phases_ns or {}).items():
            if not isinstance(name, str) or not _PHASE_NAME.match(name):
                raise ValueError("phase name %r: use lower-case letters, digits, _" % (name,))
            ns = _integer("phases_ns[%r]" % name, ns)
            if ns < 0:
                raise ValueError("phases_ns[%r] = %d is negative" % (name, ns))
            phases[name] = ns
        step = _Step(n)
        step.start_unix_ns, step.end_unix_ns = start_ns, end_ns
        step.phase_ns = phases
        if error:
            step.error = str(error)
        return step

    def _begin_step(self, n):
        try:
            if self._current is not None:
                self._warn_once("nested", "step(%r) inside step(%r): the inner one is ignored", n, self._current.n)
                return False
            if isinstance(n, bool) or not isinstance(n, int):
                n = int(n)  # numpy or tensor ints; raises for anything that is not one
            if not self._timing_resolved:
                self._resolve_timing()
            self._resolve_gpu_steps(None)
            self._current = _Step(n)
            return True
        except Exception as err:
            self._warn_once("begin-step", "step(%r) not measured: %r", n, err)
            return False

    def _end_step(self, exc_type):
        step = self._current
        if step is None:
            return
        self._current = None
        try:
            step.end_unix_ns = step.start_unix_ns + (time.perf_counter_ns() - step.start_perf_ns)
            if exc_type is not None:
                step.error = exc_type.__name__
            for run in step.open_phases:  # left open by an exception: not measured
                self._warn_once("phase-open", "phase(%r) still open at the step's end: not measured", run.name)
            step.open_phases = []
            if self._comm_declared:
                step.phase_ns.setdefault(COMM_WAIT, 0)
            if step.gpu_events or step.gpu_waits:
                self._pending_gpu.append(step)
                if len(self._pending_gpu) > self._max_pending_gpu:
                    self._pending_gpu.pop(0)
                    self._count_dropped(1, "GPU events of an old step never completed")
                self._resolve_gpu_steps(None)
            else:
                self._enqueue(step)
            if self._dump_every and step.n % self._dump_every == 0:
                self._request_dump()
        except Exception as err:
            self._warn_once("end-step", "step %r not recorded: %r", step.n, err)

    def _begin_phase(self, name):
        try:
            step = self._current
            if step is None:
                self._warn_once("phase-outside", "phase(%r) outside a step is not measured", name)
                return None
            if not _PHASE_NAME.match(name):
                self._warn_once("phase-name", "phase name %r: use lower-case letters, digits, _", name)
                return None
            start_unix = step.start_unix_ns + (time.perf_counter_ns() - step.start_perf_ns)
            run = _PhaseRun(name, self._mark())
            step.open_phases.append(run)
            return (step, start_unix, run)
        except Exception as err:
            self._warn_once("begin-phase", "phase(%r) not measured: %r", name, err)
            return None

    def _end_phase(self, name, token):
        if token is None:
            return
        try:
            step, start_unix, run = token
            run.end = self._mark()
            end_perf = time.perf_counter_ns()
            _remove(step.open_phases, run)
            if self._use_cuda:
                step.gpu_events.append(run)
            else:
                self._add_phase(step, run, run.end - run.start,
                                None if run.compute_done is None else run.end - run.compute_done, run.wait_ns)
            if self._phase_spans_every and step.n % self._phase_spans_every == 0:
                step.phase_windows.append((name, start_unix, step.start_unix_ns + (end_perf - step.start_perf_ns)))
        except Exception as err:
            self._warn_once("end-phase", "phase(%r) not measured: %r", name, err)

    def _mark(self):
        """A point in time on the clock phases are timed with: a CUDA event
        recorded on the current stream, else perf_counter_ns()."""
        if self._use_cuda:
            event = self._torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    def _add_phase(self, step, run, total_ns, tail_ns, wait_ns):
        """Adds one phase entry to the step: its compute to the phase, and its
        comm wait (from the last compute_done() to its end, plus the timed
        waits inside it) to comm_wait."""
        comm = (tail_ns or 0) + wait_ns
        step.phase_ns[run.name] = step.phase_ns.get(run.name, 0) + max(0, total_ns - comm)
        if run.declared():
            step.phase_ns[COMM_WAIT] = step.phase_ns.get(COMM_WAIT, 0) + min(comm, max(0, total_ns))

    def _begin_comm_wait(self):
        try:
            step = self._current
            if step is None:
                self._warn_once("comm-wait-outside", "comm_wait() outside a step is not measured")
                return None
            run = step.open_phases[-1] if step.open_phases else None
            return (step, run, self._mark())
        except Exception as err:
            self._warn_once("begin-comm-wait", "comm_wait() not measured: %r", err)
            return None

    def _end_comm_wait(self, token):
        if token is None:
            return
        try:
            step, run, start = token
            end = self._mark()
            self._comm_declared = True
            if self._use_cuda:
                (run.waits if run is not None else step.gpu_waits).append((start, end))
            elif run is not None:
                run.wait_ns += max(0, end - start)
            else:
                step.phase_ns[COMM_WAIT] = step.phase_ns.get(COMM_WAIT, 0) + max(0, end - start)
        except Exception as err:
            self._warn_once("end-comm-wait", "comm_wait() not measured: %r", err)

    # --- timing: CUDA events when torch with CUDA is there ----------------

    def _import_torch(self):
        if self._torch is None:
            torch = sys.modules.get("torch")
            if torch is None and importlib.util.find_spec("torch") is not None:
                torch = importlib.import_module("torch")
            self._torch = torch or False
        return self._torch or None

    def _resolve_timing(self):
        self._timing_resolved = True
        if self._timing == "cpu":
            return
        try:
            torch = self._import_torch()
            self._use_cuda = bool(torch is not None and torch.cuda.is_available())
        except Exception as err:
            self._warn_once("torch", "torch not usable, timing on the CPU: %r", err)
            self._use_cuda = False
        if self._timing == "cuda" and not self._use_cuda:
            self._warn_once("no-cuda", "timing='cuda' but torch with CUDA is not available: timing on the CPU")
        if self._use_cuda and "gpu.uuid" not in self._resource:
            try:
                torch = self._torch
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                self._resource["gpu.uuid"] = _normalise_gpu_uuid(props.uuid)
            except Exception as err:
                self._warn_once("gpu-uuid", "gpu.uuid not known: %r", err)
        if "gpu.uuid" not in self._resource:
            uuid = _gpu_uuid_from_environment()
            if uuid:
                self._resource["gpu.uuid"] = uuid

    def _resolve_gpu_steps(self, deadline):
        """Sends the oldest steps whose CUDA events completed; never waits for
        the GPU unless ``deadline`` (monotonic seconds) is given."""
        while self._pending_gpu:
            step = self._pending_gpu[0]
            try:
                ready = _events_done(step)
                while not ready and deadline is not None and time.monotonic() < deadline:
                    time.sleep(0.001)
                    ready = _events_done(step)
                if not ready:
                    return
                for run in step.gpu_events:
                    self._add_phase(step, run, _elapsed_ns(run.start, run.end),
                                    None if run.compute_done is None else _elapsed_ns(run.compute_done, run.end),
                                    sum(_elapsed_ns(a, b) for a, b in run.waits))
                if step.gpu_waits:
                    step.phase_ns[COMM_WAIT] = step.phase_ns.get(COMM_WAIT, 0) + sum(
                        _elapsed_ns(a, b) for a, b in step.gpu_waits)
                step.gpu_events = []
                step.gpu_waits = []
            except Exception as err:
                self._pending_gpu.pop(0)
                self._count_dropped(1, "CUDA event timing failed: %r" % (err,))
                continue
            self._pending_gpu.pop(0)
            self._enqueue(step)

    # --- queue and sender -------------------------------------------------

    def _enqueue(self, step):
        if not self.enabled or self._closed:
            return
        if self._sender is None:
            self._sender = _Sender(self)
            self._sender.start()
        try:
            self._queue.put_nowait(step)
        except queue.Full:
            self._count_dropped(1, "queue full (agent slow or down)")

    def _drop_queued(self):
        lost = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _WAKE:
                lost += 1
        if lost:
            self._count_dropped(lost, "close() timed out")

    def _count_dropped(self, n, why):
        with self._lock:
            self._dropped += n
        self._warn_once("dropped:" + why.split(":")[0], "dropping step records: %s", why)

    def _count_sent(self, n):
        with self._lock:
            self._sent += n

    def _warn_once(self, key, message, *args):
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        try:
            _log.warning("otelcol_gpu_step: " + message, *args)
        except Exception:
            pass

    # --- OTLP JSON payloads -----------------------------------------------

    def _step_attributes(self, step):
        attrs = {"iteration.step": step.n}
        for name in sorted(step.phase_ns):
            attrs["training.phase.%s_ns" % name] = int(step.phase_ns[name])
        attrs.update(step.attrs)
        if step.error:
            attrs["error.type"] = step.error
        return attrs

    def _resource_payload(self):
        if self._resource_json is None:
            self._resource_json = {"attributes": _attributes(self._resource)}
        return self._resource_json

    def _payload(self, batch):
        scope = {"name": "otelcol_gpu_step", "version": __version__}
        if self.mode == "logs":
            records = [self._log_record(step) for step in batch]
            return {"resourceLogs": [{"resource": self._resource_payload(),
                                      "scopeLogs": [{"scope": scope, "logRecords": records}]}]}
        spans = []
        for step in batch:
            spans.extend(self._spans(step))
        return {"resourceSpans": [{"resource": self._resource_payload(),
                                   "scopeSpans": [{"scope": scope, "spans": spans}]}]}

    def _spans(self, step):
        tid = trace_id(self.job_id, self.attempt, step.n)
        sid = rank_span_id(self.job_id, self.attempt, step.n, self.rank)
        span = {
            "traceId": tid,
            "spanId": sid,
            "parentSpanId": root_span_id(self.job_id, self.attempt, step.n),
            "name": SPAN_NAME,
            "kind": _SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(step.start_unix_ns),
            "endTimeUnixNano": str(step.end_unix_ns),
            "attributes": _attributes(self._step_attributes(step)),
        }
        if step.error:
            span["status"] = {"code": _STATUS_ERROR, "message": step.error}
        spans = [span]
        for name, start, end in step.phase_windows:
            spans.append({
                "traceId": tid,
                "spanId": os.urandom(8).hex(),
                "parentSpanId": sid,
                "name": "train.phase." + name,
                "kind": _SPAN_KIND_INTERNAL,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end),
                "attributes": _attributes({"iteration.step": step.n, "training.phase": name}),
            })
        return spans

    def _log_record(self, step):
        attrs = self._step_attributes(step)
        attrs["duration_ns"] = step.end_unix_ns - step.start_unix_ns
        attrs["event.name"] = SPAN_NAME
        record = {
            "timeUnixNano": str(step.start_unix_ns),
            "observedTimeUnixNano": str(step.end_unix_ns),
            "severityNumber": _SEVERITY_INFO,
            "severityText": "INFO",
            "eventName": SPAN_NAME,
            "body": {"stringValue": SPAN_NAME},
            "attributes": _attributes(attrs),
            "traceId": trace_id(self.job_id, self.attempt, step.n),
            "spanId": rank_span_id(self.job_id, self.attempt, step.n, self.rank),
        }
        return record

    # --- flight recorder ----------------------------------------------------

    def _request_dump(self):
        if self._dumper is None:
            self._dumper = _Dumper(self)
            self._dumper.start()
        self._dumper.request()

    def _dump_flight_recorder(self):
        """Writes torch's flight-recorder pickle as <dir>/<host>_nccl_trace_rank_<rank>,
        atomically: the agent never reads half a dump."""
        torch = sys.modules.get("torch")  # a job without torch has no flight recorder
        dump = getattr(getattr(getattr(torch, "_C", None), "_distributed_c10d", None), "_dump_nccl_trace", None)
        if dump is None:
            self._warn_once("no-dump", "torch._C._distributed_c10d._dump_nccl_trace is not available: no dumps")
            return False
        try:
            data = dump(includeCollectives=True, includeStackTraces=False, onlyActive=False)
        except TypeError:  # older torch: no keyword arguments
            data = dump()
        if not isinstance(data, bytes):
            data = bytes(data) if isinstance(data, (bytearray, memoryview)) else str(data).encode("utf-8")
        final = os.path.join(self._dump_dir, "%s_nccl_trace_rank_%d" % (self.host_name, self.rank))
        # The temporary name must not match the agent's *nccl_trace_rank_* pattern.
        tmp = os.path.join(self._dump_dir, ".otelcol_gpu_step.%d.%d.tmp" % (self._pid, self.rank))
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        with self._lock:
            self._dumps += 1
        return True


class _Sender(threading.Thread):
    """Takes batches off the queue and posts them; drops and counts on failure."""

    def __init__(self, steps):
        threading.Thread.__init__(self, name="otelcol_gpu_step-sender", daemon=True)
        self._steps = steps
        self._deadline = None  # set by stop(): monotonic time by which to give up
        self._conn = None
        parsed = urllib.parse.urlsplit(steps.endpoint)
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname or "127.0.0.1"
        self._port = parsed.port or (443 if self._https else 80)
        self._path = (parsed.path or "") + steps._path
        self._retry_at = 0.0
        self._backoff = 0.0

    def stop(self, deadline):
        self._deadline = deadline

    def run(self):
        steps = self._steps
        while True:
            try:
                stopping = self._deadline is not None
                if stopping and time.monotonic() >= self._deadline:
                    return
                batch = self._take_batch(stopping)
                if batch:
                    self._post(batch)
                elif stopping:
                    return
            except Exception as err:  # keep the thread alive whatever happens
                steps._warn_once("sender", "sender error: %r", err)
                time.sleep(0.01)

    def _take_batch(self, stopping):
        steps = self._steps
        now = time.monotonic()
        if not stopping and now < self._retry_at:
            # The agent failed recently: let the queue fill (and drop) rather than
            # spend the training job's CPU on connection attempts.
            time.sleep(min(self._retry_at - now, steps._flush_interval))
            return []
        try:
            first = steps._queue.get(timeout=0.05 if stopping else steps._flush_interval)
        except queue.Empty:
            return []
        batch = [] if first is _WAKE else [first]
        while len(batch) < steps._max_batch:
            try:
                item = steps._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _WAKE:
                batch.append(item)
        return batch

    def _post(self, batch):
        steps = self._steps
        timeout = steps._timeout
        if self._deadline is not None:
            timeout = min(timeout, self._deadline - time.monotonic())
            if timeout <= 0:
                steps._count_dropped(len(batch), "close() timed out")
                return
        try:
            body = json.dumps(steps._payload(batch), separators=(",", ":"), allow_nan=False).encode("utf-8")
        except Exception as err:
            steps._count_dropped(len(batch), "encoding failed: %r" % (err,))
            return
        try:
            status, reply = self._request(body, timeout)
        except Exception as err:
            self._close_connection()
            self._failed()
            steps._count_dropped(len(batch), "agent unreachable at %s: %r" % (steps.endpoint, err))
            return
        if 200 <= status < 300:
            rejected = _rejected(reply)
            steps._count_sent(len(batch) - rejected)
            if rejected:
                steps._count_dropped(rejected, "agent rejected records")
            self._backoff = 0.0
            self._retry_at = 0.0
        else:
            self._failed()
            steps._count_dropped(len(batch), "agent answered HTTP %d" % status)

    def _request(self, body, timeout):
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=timeout)
        else:
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
        self._conn.request("POST", self._path, body=body,
                           headers={"Content-Type": "application/json", "Connection": "keep-alive"})
        response = self._conn.getresponse()
        reply = response.read(1 << 16)
        if response.getheader("Connection", "").lower() == "close":
            self._close_connection()
        return response.status, reply

    def _close_connection(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _failed(self):
        self._backoff = min(30.0, max(0.5, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff


def _rejected(reply):
    """Rejected records in an OTLP partial-success answer, else 0."""
    if not reply:
        return 0
    try:
        partial = json.loads(reply.decode("utf-8")).get("partialSuccess") or {}
        return int(partial.get("rejectedSpans") or partial.get("rejectedLogRecords") or 0)
    except Exception:
        return 0


class _Dumper(threading.Thread):
    """Writes flight-recorder dumps off the training thread; requests that come
    while a dump is running are merged into the next one."""

    def __init__(self, steps):
        threading.Thread.__init__(self, name="otelcol_gpu_step-dumper", daemon=True)
        self._steps = steps
        self._wake = threading.Event()
        self._pending = False
        self._stopping = False
        self._disabled = False

    def request(self):
        if not self._disabled:
            self._pending = True
            self._wake.set()

    def stop(self):
        """Ends the thread after the dump already asked for, if any."""
        self._stopping = True
        self._wake.set()

    def run(self):
        steps = self._steps
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._pending and not self._disabled:
                self._pending = False
                try:
                    if not steps._dump_flight_recorder():
                        self._disabled = True
                except Exception as err:
                    with steps._lock:
                        steps._dump_errors += 1
                    steps._warn_once("dump-error", "flight-recorder dump failed: %r", err)
            if self._stopping:
                return


# --- python3 otelcol_gpu_step.py replay -------------------------------------

_REPLAY_HELP = """Reads step records, one JSON object a line, on stdin and sends each
through record_step() of one Steps per (job_id, attempt, rank), to the record's
endpoint. Fields: job_id, attempt, rank, local_rank, world_size, host,
gpu_uuid, pp_stage (optional), service_name (optional), endpoint, step,
start_ns, end_ns, phases_ns {name: ns} (compute; "comm_wait": the step's
exposed communication wait), loss (a number, or "NaN",
"Infinity", "-Infinity"), tokens, flops, attributes {key: value}, error
(optional). At the end of stdin it sends what is queued and prints one JSON
line: {"records", "sent", "dropped", "invalid"}. A line that is not a valid
record is reported on stderr with its number and counted as invalid."""


class _Replay(object):
    """The Steps objects of one replay, by (job, attempt, rank), and its counts."""

    def __init__(self, flush_interval, close_timeout, max_queue):
        self._flush_interval = flush_interval
        self._close_timeout = close_timeout
        self._max_queue = max_queue
        self._steps = {}
        self.records = 0
        self.invalid = 0

    def line(self, number, raw):
        try:
            rec = json.loads(raw.decode("utf-8"))
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
            steps = self._steps_for(rec)
            args = self._step_arguments(rec)
        except Exception as err:
            self.invalid += 1
            sys.stderr.write("otelcol_gpu_step replay: line %d: %s\n" % (number, err))
            return
        self.records += 1
        steps.record_step(**args)

    def _steps_for(self, rec):
        job_id = rec.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            raise ValueError("job_id: want a non-empty string")
        key = (job_id, _integer("attempt", rec.get("attempt", 0)), _integer("rank", rec.get("rank")))
        steps = self._steps.get(key)
        if steps is None:
            pp_stage = rec.get("pp_stage")
            steps = Steps(
                job_id=key[0], attempt=key[1], rank=key[2],
                local_rank=_integer("local_rank", rec.get("local_rank", 0)),
                world_size=_integer("world_size", rec.get("world_size", 1)),
                host_name=rec.get("host") or None, gpu_uuid=rec.get("gpu_uuid") or None,
                pp_stage=None if pp_stage is None else _integer("pp_stage", pp_stage),
                service_name=rec.get("service_name") or None, endpoint=rec.get("endpoint") or None,
                k8s_pod_uid=rec.get("k8s_pod_uid") or None,
                timing="cpu", flush_interval=self._flush_interval, close_timeout=self._close_timeout,
                max_queue=self._max_queue, register_atexit=False)
            if not rec.get("k8s_pod_uid"):
                # The replay's own pod is not the rank's.
                steps._resource.pop("k8s.pod.uid", None)
            self._steps[key] = steps
        return steps

    @staticmethod
    def _step_arguments(rec):
        for name in ("step", "start_ns", "end_ns"):
            if name not in rec:
                raise ValueError("%s is missing" % name)
        phases, attributes = rec.get("phases_ns"), rec.get("attributes")
        if phases is not None and not isinstance(phases, dict):
            raise ValueError("phases_ns: want an object")
        if attributes is not None and not isinstance(attributes, dict):
            raise ValueError("attributes: want an object")
        loss = rec.get("loss")
        if isinstance(loss, str):
            loss = float(loss)  # "NaN", "Infinity", "-Infinity": JSON has no such numbers
        elif loss is not None and (isinstance(loss, bool) or not isinstance(loss, (int, float))):
            raise ValueError("loss: want a number")
        return {"n": rec["step"], "start_ns": rec["start_ns"], "end_ns": rec["end_ns"], "phases_ns": phases,
                "tokens": rec.get("tokens"), "loss": loss, "flops": rec.get("flops"),
                "attributes": attributes, "error": rec.get("error")}

    def close(self):
        """Closes every Steps at once (each within close_timeout) and returns the summary."""
        threads = [threading.Thread(target=s.close) for s in self._steps.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"records": self.records, "sent": sum(s.sent for s in self._steps.values()),
                "dropped": sum(s.dropped for s in self._steps.values()), "invalid": self.invalid}


def _replay(args, stdin, stdout):
    replay = _Replay(args.flush_interval, args.close_timeout, args.max_queue)
    code = 0
    number = 0
    try:
        for raw in stdin:
            number += 1
            if raw.strip():
                replay.line(number, raw)
    except (OSError, ValueError) as err:
        sys.stderr.write("otelcol_gpu_step replay: reading stdin after line %d: %s\n" % (number, err))
        code = 1
    summary = replay.close()
    stdout.write(json.dumps(summary) + "\n")
    stdout.flush()
    return code


def main(argv=None):
    parser = argparse.ArgumentParser(prog="otelcol_gpu_step.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    replay = commands.add_parser("replay", help="send step records read as JSON lines on stdin",
                                 description=_REPLAY_HELP)
    replay.add_argument("--flush-interval", type=float, default=0.2, help="seconds (default 0.2)")
    replay.add_argument("--close-timeout", type=float, default=5.0,
                        help="seconds to send what is queued at the end of stdin (default 5)")
    replay.add_argument("--max-queue", type=int, default=2048, help="records queued per rank (default 2048)")
    args = parser.parse_args(argv)
    if args.command != "replay":
        parser.print_help(sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s")
    return _replay(args, sys.stdin.buffer, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
