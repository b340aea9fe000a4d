package dcgmsrc

// The fake DCGM's health watches: FakeHealth's, behind the same gate as
// every other call of the fake (Init first; nothing while nv-hostengine is
// down, whose restart loses the groups).

func (f *fakeDCGM) gate(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enter(name)
}

func (f *fakeDCGM) NVSwitches() ([]uint, error) {
	if err := f.gate("NVSwitches"); err != nil {
		return nil, err
	}
	return f.FakeHealth.NVSwitches()
}

func (f *fakeDCGM) CreateHealthGroup(name string, gpus, switches []uint) (handle, error) {
	if err := f.gate("CreateHealthGroup"); err != nil {
		return 0, err
	}
	return f.FakeHealth.CreateHealthGroup(name, gpus, switches)
}

func (f *fakeDCGM) HealthSet(g handle, systems healthSystems) error {
	if err := f.gate("HealthSet"); err != nil {
		return err
	}
	return f.FakeHealth.HealthSet(g, systems)
}

func (f *fakeDCGM) HealthCheck(g handle) ([]healthIncident, error) {
	if err := f.gate("HealthCheck"); err != nil {
		return nil, err
	}
	return f.FakeHealth.HealthCheck(g)
}

// dropHealthGroups is what an nv-hostengine restart does to them.
func (f *FakeHealth) dropHealthGroups() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.groups)
}
