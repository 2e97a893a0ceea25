package docker

// AbandonPoolForTest stops h's warm pool the way a killed worker does: its
// manager and creates stop, and every pooled sandbox stays where it is for
// the reaper.
func (h *Host) AbandonPoolForTest() {
	p := h.pool
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	p.work.Wait()
}

// PoolSlack is poolSlack, for tests that compute a pooled keeper's deadline.
const PoolSlack = poolSlack
