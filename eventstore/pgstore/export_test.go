package pgstore

// SetHooksForTest makes the store's appends call beforeTx once their
// arguments are checked, before their transaction starts, and afterLock
// (with the backend's process ID) once their transaction holds its locks,
// before it writes. Set it before the store is used; nil hooks are skipped.
func SetHooksForTest(s *Store, beforeTx func(), afterLock func(pid uint32)) {
	s.hooks = &testHooks{beforeTx: beforeTx, afterLock: afterLock}
}
