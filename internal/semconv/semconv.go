// Package semconv holds the metric and attribute names that more than one
// component of otelcol-gpu emits or reads. docs/semconv.md explains the rules
// behind them and the Prometheus names each becomes after remote write.
//
// OpenTelemetry semantic conventions come first (hw.*, host.name,
// network.io.direction, error.type); the project's own namespaces (ib.*,
// gpu.*, nccl.*, training.*) hold what the conventions do not cover.
package semconv

// Resource and data point attributes shared across components.
const (
	AttrHostName = "host.name"

	// InfiniBand / RoCE.
	AttrIBDevice    = "ib.device"     // HCA name under /sys/class/infiniband, e.g. mlx5_0
	AttrIBPort      = "ib.port"       // port number as a string, e.g. "1"
	AttrIBLinkLayer = "ib.link_layer" // InfiniBand or Ethernet (RoCE)
	AttrIBState     = "ib.state"      // logical port state text, e.g. ACTIVE
	AttrIBPhysState = "ib.phys_state" // physical port state text, e.g. LinkUp
	AttrIBHWCounter = "ib.hw_counter" // mlx5 hw_counters file name, e.g. out_of_sequence
	AttrIBHCAType   = "ib.hca_type"
	AttrIBBoardID   = "ib.board_id"
	AttrIBFWVer     = "ib.fw_ver"
	AttrIBNodeGUID  = "ib.node_guid"

	// OpenTelemetry semantic conventions used with hw.* metrics.
	AttrNetworkIODirection = "network.io.direction" // transmit | receive
	AttrErrorType          = "error.type"

	// GPU identity (resource attributes of every GPU's metrics and logs).
	AttrGPUUUID          = "gpu.uuid"
	AttrGPUIndex         = "gpu.index"
	AttrGPUModel         = "gpu.model"
	AttrGPUPCIBusID      = "gpu.pci_bus_id"
	AttrGPUDevice        = "gpu.device" // device node, e.g. nvidia0
	AttrGPUDriverVersion = "gpu.driver.version"
	AttrGPUMIGInstanceID = "gpu.mig.gpu_instance_id"
	AttrGPUMIGComputeID  = "gpu.mig.compute_instance_id"
	AttrGPUMIGProfile    = "gpu.mig.profile"

	// XID events (log records of the dcgm receiver).
	AttrGPUXID       = "gpu.xid"
	AttrGPUXIDName   = "gpu.xid.name"
	AttrGPUXIDAction = "gpu.xid.action"
	AttrGPUXIDSource = "gpu.xid.source" // dcgm | nvml | kmsg | exporter
	AttrEventName    = "event.name"
	EventGPUXID      = "gpu.xid"
	EventGPUHang     = "gpu.unresponsive"

	// Workload that owns a GPU.
	AttrK8sPodName       = "k8s.pod.name"
	AttrK8sNamespaceName = "k8s.namespace.name"
	AttrK8sContainerName = "k8s.container.name"
	AttrSlurmJobID       = "slurm.job.id"
	AttrProcessPID       = "process.pid"
	AttrProcessName      = "process.executable.name"

	// Training (the training-script contract, docs/training-scripts.md).
	AttrTrainingJobID     = "training.job.id"
	AttrTrainingRank      = "training.rank"
	AttrTrainingWorldSize = "training.world_size"
	AttrIterationStep     = "iteration.step"

	// NCCL collectives (ncclflightreceiver).
	AttrNCCLCollectiveSeq = "nccl.collective.seq"
	AttrNCCLP2PSeq        = "nccl.p2p.seq"
	AttrNCCLOpID          = "nccl.op_id"
	AttrNCCLRecordID      = "nccl.record_id"
	AttrNCCLCollective    = "nccl.collective" // all_reduce, AllReduce, send, ...
	AttrNCCLPGID          = "nccl.pg.id"
	AttrNCCLPGName        = "nccl.pg.name"
	AttrNCCLPGDesc        = "nccl.pg.desc"
	AttrNCCLCommID        = "nccl.comm.id"
	AttrNCCLMessageBytes  = "nccl.message.bytes"
	AttrNCCLDtypes        = "nccl.dtypes"
	AttrNCCLState         = "nccl.state" // scheduled | started | completed
	AttrNCCLTimeoutMs     = "nccl.timeout_ms"
	AttrNCCLP2PPeer       = "nccl.p2p.peer"
	AttrNCCLTimingSource  = "nccl.timing_source"
	AttrNCCLBusBandwidth  = "nccl.bus_bandwidth" // GB/s
	AttrNCCLAlgoBandwidth = "nccl.algo_bandwidth"
	AttrNCCLSource        = "nccl.source"  // flight_recorder | inspector | ras
	AttrNCCLFinding       = "nccl.finding" // hang | mismatch | straggler | ...
	AttrNCCLFindingKey    = "nccl.finding.key"
	EventNCCLFinding      = "nccl.finding"
)

// Values of network.io.direction.
const (
	DirectionTransmit = "transmit"
	DirectionReceive  = "receive"
)

// InfiniBand metric names.
const (
	MetricHWNetworkIO      = "hw.network.io"      // By, cumulative
	MetricHWNetworkPackets = "hw.network.packets" // {packet}, cumulative
	MetricHWErrors         = "hw.errors"          // {error}, cumulative, by error.type
	MetricIBPortXmitWait   = "ib.port.xmit_wait"  // {tick}, cumulative
	MetricIBPortHWCounter  = "ib.port.hw_counter" // {event}, cumulative, by ib.hw_counter
	MetricIBPortState      = "ib.port.state"      // gauge: numeric state, text in ib.state
	MetricIBPortPhysState  = "ib.port.phys_state" // gauge: numeric state, text in ib.phys_state
	MetricIBPortRate       = "ib.port.rate"       // gauge, By/s
	MetricIBDeviceInfo     = "ib.device.info"     // gauge = 1, identity in attributes
)
