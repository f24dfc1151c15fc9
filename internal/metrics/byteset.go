package metrics

import (
	"bytes"
	"hash/maphash"
)

// byteSet numbers distinct byte strings in the order they are added. It is
// an open-addressing hash table over slices of the body: unlike a
// map[string]int it allocates no string per member, which was a third of
// the engine's time on case_ids (see `make bench`).
type byteSet struct {
	seed  maphash.Seed
	slots []int32 // 1 + index into keys; 0 is empty
	keys  [][]byte
}

// newByteSet makes a set for up to n members.
func newByteSet(n int) *byteSet {
	size := 16
	for size < 2*n {
		size *= 2
	}
	return &byteSet{seed: maphash.MakeSeed(), slots: make([]int32, size), keys: make([][]byte, 0, n)}
}

// add returns the number of b, and whether b was new.
func (s *byteSet) add(b []byte) (int, bool) {
	if 2*len(s.keys) >= len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := maphash.Bytes(s.seed, b) & mask; ; i = (i + 1) & mask {
		slot := s.slots[i]
		if slot == 0 {
			s.keys = append(s.keys, b)
			s.slots[i] = int32(len(s.keys))
			return len(s.keys) - 1, true
		}
		if bytes.Equal(s.keys[slot-1], b) {
			return int(slot - 1), false
		}
	}
}

func (s *byteSet) grow() {
	bigger := newByteSet(2 * len(s.slots))
	bigger.seed = s.seed
	for _, k := range s.keys {
		bigger.add(k)
	}
	*s = *bigger
}
