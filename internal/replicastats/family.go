package replicastats

import "sync"

// Family is a set of values of type V, one per key (the label values of a
// metric), each made on the first Get of its key. Safe for concurrent use.
type Family[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]*V
	newV func() *V
}

// NewFamily returns an empty family whose values newV makes.
func NewFamily[K comparable, V any](newV func() *V) *Family[K, V] {
	return &Family[K, V]{m: map[K]*V{}, newV: newV}
}

// Get returns k's value, made now if k is new.
func (f *Family[K, V]) Get(k K) *V {
	f.mu.RLock()
	v, ok := f.m[k]
	f.mu.RUnlock()
	if ok {
		return v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok = f.m[k]; !ok {
		v = f.newV()
		f.m[k] = v
	}
	return v
}

// Each calls fn with every key and its value, in no order. fn must not
// call Get.
func (f *Family[K, V]) Each(fn func(K, *V)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for k, v := range f.m {
		fn(k, v)
	}
}
