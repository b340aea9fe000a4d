"""A PyTorch DDP training loop reporting its steps with otelcol_gpu_step.

Run with torchrun, one process per GPU, on nodes where the otelcol-gpu agent
runs (OTLP/HTTP on 127.0.0.1:4318, the ncclflight receiver watching
/var/run/torch-fr):

    export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_ENABLE_TIMING=1
    export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/var/run/torch-fr/nccl_trace_rank_
    export OTEL_SERVICE_NAME=llama-pretrain PYTHONPATH=/path/to/sdk/python
    torchrun --nnodes=$NNODES --nproc-per-node=8 --rdzv-id=$JOB_NAME \
        --rdzv-backend=c10d --rdzv-endpoint=$MASTER:29500 pytorch_loop.py

``--rdzv-id`` becomes TORCHELASTIC_RUN_ID, the job id every rank shares;
the restart count (TORCHELASTIC_RESTART_COUNT) becomes the attempt. Under
Slurm, SLURM_JOB_ID and SLURM_RESTART_COUNT serve instead.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from the repository
import otelcol_gpu_step  # noqa: E402

BATCH = 8
SEQ_LEN = 1024
HIDDEN = 2048
LOSS_EVERY = 10  # loss.item() waits for the GPU: read it every few steps only


def synthetic_batches(device):
    """Stands in for a DataLoader: random inputs and targets, pinned on the host."""
    while True:
        x = torch.randn(BATCH, SEQ_LEN, HIDDEN).pin_memory()
        y = torch.randn(BATCH, SEQ_LEN, HIDDEN).pin_memory()
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)  # before the first step: gpu.uuid is read from the current device
    device = torch.device("cuda", local_rank)

    model = torch.nn.Sequential(
        torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN),
    ).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.MSELoss()
    n_params = sum(p.numel() for p in model.parameters())
    tokens = BATCH * SEQ_LEN
    flops = 6.0 * n_params * tokens  # forward + backward of a dense model, per rank

    # Job, attempt, rank, local rank and world size come from torchrun's
    # environment; phases are timed with CUDA events; every 100 steps a
    # flight-recorder dump goes where the agent's ncclflight receiver looks.
    steps = otelcol_gpu_step.Steps(
        dump_flight_recorder_every=100,
        dump_dir=os.environ.get("FR_DUMP_DIR", "/var/run/torch-fr"),
    )
    # Before the first forward: a communication hook that marks each gradient
    # bucket ready (a CUDA event) and runs DDP's default all-reduce. backward_ns
    # is then this rank's compute, up to its last bucket; the rest of the
    # backward, waiting for the all-reduce (i.e. for the slowest rank), is
    # training.phase.comm_wait_ns. Without it every rank's backward would
    # include the slowest rank's, and the gateway could not tell who is slow.
    steps.attach_ddp(model)

    start_step = 0  # after a restart: the global step restored from the checkpoint
    batches = synthetic_batches(device)
    loss_value = None
    for step in range(start_step, start_step + 1000):
        with steps.step(step):
            with steps.phase("dataload"):
                x, y = next(batches)
            with steps.phase("forward"):
                loss = loss_fn(model(x), y)
            with steps.phase("backward"):
                loss.backward()  # compute up to the last bucket; the all-reduce tail is comm_wait
            with steps.phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            if step % LOSS_EVERY == 0:
                loss_value = loss.item()  # a sync point; NaN is reported as NaN
            steps.record(tokens=tokens, loss=loss_value if step % LOSS_EVERY == 0 else None, flops=flops)

    steps.close()  # sends what is queued, waiting at most close_timeout (2 s)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
