package metrics

import (
	"strconv"
	"testing"
)

func TestByteSet(t *testing.T) {
	s := newByteSet(2, 1) // grows several times below
	want := map[string]int{}
	for i := range 1000 {
		key := strconv.Itoa(i % 700) // 300 repeats
		n, added := s.add([]byte(key))
		prev, seen := want[key]
		if added == seen {
			t.Fatalf("add(%q) added = %v after %d adds", key, added, i)
		}
		if seen && n != prev {
			t.Fatalf("add(%q) = %d, first numbered %d", key, n, prev)
		}
		if !seen {
			if n != len(want) {
				t.Fatalf("add(%q) = %d, want the next number %d", key, n, len(want))
			}
			want[key] = n
		}
	}
	if _, added := s.add(nil); !added {
		t.Error("the empty string is a member of its own")
	}
	if _, added := s.add([]byte{}); added {
		t.Error("nil and empty are the same string")
	}
}
