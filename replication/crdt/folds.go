package crdt

import "container/heap"

// folds are the debt logs that hold events after their cut, by the time of
// their newest event: the cut folds a log once the node's completeness
// bound has passed that time. A heap, so that a cut looks only at the logs
// due, however many keys are busy: a key written again is pushed again,
// and its older entries are skipped when they come up.
type folds struct {
	newest map[dbKey]int64 // the current newest event time of each key
	h      foldHeap
}

type foldEntry struct {
	k  dbKey
	at int64
}

type foldHeap []foldEntry

func (h foldHeap) Len() int           { return len(h) }
func (h foldHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h foldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *foldHeap) Push(x any)        { *h = append(*h, x.(foldEntry)) }
func (h *foldHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newFolds() folds { return folds{newest: map[dbKey]int64{}} }

// note records that k's newest unfolded event is at, or with ok false that
// it has none.
func (f *folds) note(k dbKey, at int64, ok bool) {
	if !ok {
		delete(f.newest, k)
		return
	}
	if cur, seen := f.newest[k]; seen && cur == at {
		return
	}
	f.newest[k] = at
	heap.Push(&f.h, foldEntry{k, at})
}

// due removes and returns the keys whose newest event is before complete.
func (f *folds) due(complete int64) []dbKey {
	var out []dbKey
	for len(f.h) > 0 && f.h[0].at < complete {
		e := heap.Pop(&f.h).(foldEntry)
		if cur, ok := f.newest[e.k]; ok && cur == e.at {
			out = append(out, e.k)
			delete(f.newest, e.k)
		}
	}
	return out
}
