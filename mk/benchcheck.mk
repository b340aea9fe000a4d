# The allocation gate (issue 32): the hot-path benchmarks listed in
# tools/benchcheck/benchmarks.txt, run a fixed number of iterations at
# -cpu 1, their B/op and allocs/op compared with
# tools/benchcheck/baseline.txt (BENCHMARKS.md, "Allocation gate").
#
#   make bench-check     # fails when a benchmark allocates more than 10 %
#                        # over the baseline (and at least 1 alloc/op or
#                        # 64 B/op more), or the baseline is out of step
#   make bench-baseline  # rewrites the baseline: commit it with the change
#                        # that moved the numbers
#
# BENCHCHECK_FLAGS passes flags on (go run ./tools/benchcheck -h), e.g.
# BENCHCHECK_FLAGS='-raw _build/bench.txt' keeps the benchmarks' output.
BENCHCHECK_FLAGS ?=

.PHONY: bench-check bench-baseline

bench-check:
	$(GO) run ./tools/benchcheck -go $(GO) $(BENCHCHECK_FLAGS)

bench-baseline:
	$(GO) run ./tools/benchcheck -go $(GO) -update $(BENCHCHECK_FLAGS)
