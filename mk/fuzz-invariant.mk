# The trust invariant of issue 29 under the fuzzer (test/invariant): OTLP
# requests built from a grammar of what a sender can put on the wire go
# through the agent's OTLP pipelines and the gateway's correlator, in
# process, and no fault may name another node or GPU, no hardware signal
# pass provenance, no refusal go uncounted. make test runs the target's seeds
# and TestInvariant's seeded cases; this searches further. One worker by
# default (the machine may be shared); inputs are minimized once, since the
# pipelines' goroutines make nearly every input look new to the coverage.
FUZZ_INVARIANT_TIME ?= 10m
FUZZ_INVARIANT_PARALLEL ?= 1

.PHONY: fuzz-invariant
fuzz-invariant:
	$(GO) test -run '^$$' -fuzz '^FuzzInvariant$$' -fuzztime $(FUZZ_INVARIANT_TIME) -fuzzminimizetime 1x \
	  -parallel $(FUZZ_INVARIANT_PARALLEL) ./test/invariant/
