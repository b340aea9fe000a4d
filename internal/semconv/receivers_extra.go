package semconv

// Names the receivers write and another component reads that the other
// semconv files do not hold.
const (
	// AttrServiceInstanceID is OpenTelemetry's service.instance.id: under
	// naming dcgm_exporter the dcgm receiver sets it to the host name, and
	// remote write turns it into the instance label dashboards expect.
	AttrServiceInstanceID = "service.instance.id"

	// Values of gpu.ecc.type on gpu.ecc.errors, written by the dcgm
	// receiver's catalogue; the nodestate processor keeps one counter each.
	ECCTypeSBEVolatile  = "sbe_volatile"
	ECCTypeDBEVolatile  = "dbe_volatile"
	ECCTypeSBEAggregate = "sbe_aggregate"
	ECCTypeDBEAggregate = "dbe_aggregate"

	// Values of error.type on gpu.nvlink.errors, written by the dcgm
	// receiver's catalogue; the nodestate processor keeps one counter each.
	NVLinkErrorCRCFlit  = "crc_flit"
	NVLinkErrorCRCData  = "crc_data"
	NVLinkErrorReplay   = "replay"
	NVLinkErrorRecovery = "recovery"
)
