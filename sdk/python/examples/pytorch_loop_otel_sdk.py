"""The same DDP loop as pytorch_loop.py, with the official OpenTelemetry SDK.

For jobs that already use OpenTelemetry (opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http installed). The contract's ids
(docs/training-scripts.md) are set explicitly: the step span's parent is a
non-recording span context holding the step's trace id and the root's span
id (the root itself is emitted by the gateway, never here), and a custom
IdGenerator hands out the rank's span id for the next span started.

Phases are the rank's own compute (the contract): a DDP communication hook
records a CUDA event when each gradient bucket is ready, so the backward's
compute ends at the last bucket and the rest of the backward, waiting for
the all-reduce it overlaps, is sent as training.phase.comm_wait_ns.

    torchrun --nproc-per-node=8 --rdzv-id=$JOB_NAME ... pytorch_loop_otel_sdk.py
"""

import contextlib
import hashlib
import os
import socket
import time

import torch
import torch.distributed as dist
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

BATCH = 8
SEQ_LEN = 1024
HIDDEN = 2048


# --- The contract's ids, as integers for the OpenTelemetry API ----------------

def _digest(text, nbytes):
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:nbytes], "big")


def step_ids(job_id, attempt, step, rank):
    """(trace id, rank span id, root span id) of docs/training-scripts.md."""
    prefix = "%s\x00%d\x00%d" % (job_id, attempt, step)
    return _digest(prefix, 16), _digest(prefix + "\x00%d" % rank, 8), _digest(prefix + "\x00root", 8)


class StepIdGenerator(IdGenerator):
    """Random ids, except the span id set in ``next_span_id`` for the next span.

    The trace id of a span with a valid parent is the parent's, so only the
    span id needs steering.
    """

    def __init__(self):
        self._random = RandomIdGenerator()
        self.next_span_id = None

    def generate_span_id(self):
        span_id, self.next_span_id = self.next_span_id, None
        return span_id if span_id is not None else self._random.generate_span_id()

    def generate_trace_id(self):
        return self._random.generate_trace_id()


# --- Phase timing with CUDA events, read once the GPU is past them -------------

class PendingStep(object):
    """A step span kept open until its phases' CUDA events completed."""

    def __init__(self, span, end_ns):
        self.span = span
        self.end_ns = end_ns
        self.events = []  # (phase, start event, end event)

    def ready(self):
        return all(end.query() for _, _, end in self.events)

    def finish(self):
        totals = {"comm_wait": 0}  # present, 0 included: the phases are compute-only
        for name, start, end in self.events:
            totals[name] = totals.get(name, 0) + int(start.elapsed_time(end) * 1e6)
        for name, ns in totals.items():
            self.span.set_attribute("training.phase.%s_ns" % name, ns)
        self.span.end(end_time=self.end_ns)


class BucketMarks(object):
    """A DDP communication hook: a CUDA event on the compute stream when a
    gradient bucket is ready, then DDP's default all-reduce of the bucket."""

    def __init__(self):
        self.last = None  # the latest bucket's event

    def hook(self, process_group, bucket):  # DDP checks the name "bucket"
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        self.last = event
        return allreduce_hook(process_group, bucket)


@contextlib.contextmanager
def phase(record, name, marks=None):
    """Brackets a phase with CUDA events on the current stream. With marks (the
    backward under DDP), the phase's compute ends at the last bucket's event and
    the rest, the all-reduce wait the compute did not hide, is comm_wait."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if marks is not None:
        marks.last = None
    start.record()
    yield
    end.record()
    last = marks.last if marks is not None else None
    if last is None:  # no bucket (no_sync, or not DDP): all compute
        record.events.append((name, start, end))
    else:
        record.events.append((name, start, last))
        record.events.append(("comm_wait", last, end))


def end_completed(pending, wait=False):
    """Ends the spans whose events completed, oldest first; never waits unless told to."""
    while pending and (wait or pending[0].ready()):
        if wait:
            pending[0].events[-1][2].synchronize()
        pending.pop(0).finish()


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)

    job_id = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ["SLURM_JOB_ID"]
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or os.environ.get("SLURM_RESTART_COUNT") or 0)
    rank = dist.get_rank()

    resource = Resource.create({  # service.name from OTEL_SERVICE_NAME
        "training.job.id": job_id,
        "training.attempt": attempt,
        "training.rank": rank,
        "training.local_rank": local_rank,
        "training.world_size": dist.get_world_size(),
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
        "gpu.uuid": "GPU-%s" % torch.cuda.get_device_properties(local_rank).uuid,
    })
    ids = StepIdGenerator()
    provider = TracerProvider(resource=resource, id_generator=ids)
    # The batch processor drops (never blocks) when its queue is full.
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint="http://127.0.0.1:4318/v1/traces", timeout=2),
        max_queue_size=2048, schedule_delay_millis=1000, export_timeout_millis=2000))
    tracer = provider.get_tracer("pytorch_loop_otel_sdk")

    model = torch.nn.Sequential(
        torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN),
    ).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank])
    marks = BucketMarks()
    model.register_comm_hook(None, marks.hook)  # before the first forward
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.MSELoss()
    tokens = BATCH * SEQ_LEN
    flops = 6.0 * sum(p.numel() for p in model.parameters()) * tokens

    pending = []
    for step in range(1000):
        trace_id, span_id, root_id = step_ids(job_id, attempt, step, rank)
        root = SpanContext(trace_id=trace_id, span_id=root_id, is_remote=True,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))
        ids.next_span_id = span_id
        span = tracer.start_span("train.step", context=trace.set_span_in_context(NonRecordingSpan(root)),
                                 kind=SpanKind.INTERNAL, start_time=time.time_ns(),
                                 attributes={"iteration.step": step})
        record = PendingStep(span, 0)

        with phase(record, "dataload"):
            x = torch.randn(BATCH, SEQ_LEN, HIDDEN, device=device)
            y = torch.randn(BATCH, SEQ_LEN, HIDDEN, device=device)
        with phase(record, "forward"):
            loss = loss_fn(model(x), y)
        with phase(record, "backward", marks):
            loss.backward()
        with phase(record, "optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        span.set_attribute("training.tokens", tokens)
        span.set_attribute("training.flops", flops)
        if step % 10 == 0:
            span.set_attribute("training.loss", loss.item())  # a sync point: every few steps only
        record.end_ns = time.time_ns()
        pending.append(record)
        end_completed(pending)

    end_completed(pending, wait=True)
    provider.force_flush(timeout_millis=2000)
    provider.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
