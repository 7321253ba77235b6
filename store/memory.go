package store

// The memory store: the records in this process, in an LRU bounded by
// count and bytes (Config.MaxResponses, MaxBytes). Only the store actor
// (node.go) calls these.

func (st *actorStore) add(rec *Record) {
	if old := st.byID[rec.ID]; old != nil {
		st.remove(old)
	}
	st.byID[rec.ID] = rec
	st.linkFront(rec)
	st.bytes += rec.Size
	st.stored.Add(1)
	// Evict from the cold end; never the record just put, even when it
	// alone is over the byte bound (it is then the only one kept).
	for (len(st.byID) > st.cfg.MaxResponses || st.bytes > st.cfg.MaxBytes) && st.head.prev != rec {
		st.remove(st.head.prev)
		st.evicted.Add(1)
	}
	st.publish()
}

func (st *actorStore) remove(rec *Record) {
	delete(st.byID, rec.ID)
	rec.prev.next, rec.next.prev = rec.next, rec.prev
	rec.prev, rec.next = nil, nil
	st.bytes -= rec.Size
	st.publish()
}

func (st *actorStore) touch(rec *Record) {
	rec.prev.next, rec.next.prev = rec.next, rec.prev
	st.linkFront(rec)
}

func (st *actorStore) linkFront(rec *Record) {
	rec.prev, rec.next = &st.head, st.head.next
	st.head.next.prev = rec
	st.head.next = rec
}

func (st *actorStore) publish() {
	st.count.Store(int64(len(st.byID)))
	st.held.Store(st.bytes)
}
