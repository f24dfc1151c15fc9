package metrics

import (
	"bytes"
	"hash/maphash"
	"slices"
)

// byteSet numbers distinct byte strings in the order they are added. It is
// an open-addressing hash table that copies its members into one buffer:
// unlike a map[string]int it allocates no string per member, which was a
// third of the engine's time on case_ids (see `make bench`), and unlike a
// table of slices it holds no pointer for the collector to follow.
type byteSet struct {
	seed  maphash.Seed
	slots []int32 // 1 + a member's number; 0 is empty
	data  []byte  // the members, one after another
	ends  []int32 // where each member ends in data
}

// newByteSet makes a set for up to n members of about size bytes each; it
// grows past either.
func newByteSet(n, size int) *byteSet {
	s := new(byteSet)
	s.reset(n, size)
	return s
}

// reset empties s and sizes it for up to n members of about size bytes
// each, keeping the storage it has.
func (s *byteSet) reset(n, size int) {
	slots := 16
	for slots < 2*n {
		slots *= 2
	}
	if cap(s.slots) >= slots {
		s.slots = s.slots[:slots]
		clear(s.slots)
	} else {
		s.slots = make([]int32, slots)
	}
	s.seed = maphash.MakeSeed()
	s.data = slices.Grow(s.data[:0], n*size)
	s.ends = slices.Grow(s.ends[:0], n)
}

// member returns member k.
func (s *byteSet) member(k int) []byte {
	start := int32(0)
	if k > 0 {
		start = s.ends[k-1]
	}
	return s.data[start:s.ends[k]]
}

// add returns the number of b, and whether b was new.
func (s *byteSet) add(b []byte) (int, bool) {
	if 2*len(s.ends) >= len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := maphash.Bytes(s.seed, b) & mask; ; i = (i + 1) & mask {
		slot := s.slots[i]
		if slot == 0 {
			s.data = append(s.data, b...)
			s.ends = append(s.ends, int32(len(s.data)))
			s.slots[i] = int32(len(s.ends))
			return len(s.ends) - 1, true
		}
		if bytes.Equal(s.member(int(slot-1)), b) {
			return int(slot - 1), false
		}
	}
}

func (s *byteSet) grow() {
	bigger := newByteSet(len(s.slots), len(s.data)/max(1, len(s.ends)))
	bigger.seed = s.seed
	for k := range s.ends {
		bigger.add(s.member(k))
	}
	*s = *bigger
}
