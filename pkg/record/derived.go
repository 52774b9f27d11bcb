package record

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// A processor may turn one record into several (Conduit's split and
// clone). Each of those derived records needs a position of its own: the
// dedup store, the dead-letter queue and a destination that reads back the
// last record it holds all tell records apart by position, and siblings
// sharing their original's position would be one record to them. So the
// engine gives the i-th record derived from a record at position p the
// position
//
//	DerivedMark  uvarint(len(p))  p  uvarint(i)
//
// The format is persisted (in dedup entries and in what destinations
// write): it must not change.
//
// The mark begins with 0xff, a byte that never occurs in UTF-8 text (so in
// no JSON or decimal position of any source here), followed by a NUL; the
// engine refuses a source position that begins with the mark, so a derived
// position can never equal a position a source produced. Siblings share
// everything up to their index, which keeps dedup entries small (they are
// front-coded). A record derived from a derived record (split after split)
// nests: its parent is the derived position.

// DerivedMark is how every derived position begins.
const DerivedMark = "\xff\x00derived\x00"

// DerivedPosition returns the position of the index-th record (from 0)
// derived from the record at parent.
func DerivedPosition(parent Position, index int) Position {
	out := make(Position, 0, len(DerivedMark)+2*binary.MaxVarintLen64+len(parent))
	out = append(out, DerivedMark...)
	out = binary.AppendUvarint(out, uint64(len(parent)))
	out = append(out, parent...)
	return binary.AppendUvarint(out, uint64(index))
}

// IsDerived reports whether p begins as a derived position does.
func IsDerived(p Position) bool { return bytes.HasPrefix(p, []byte(DerivedMark)) }

// ParseDerived returns the parent position and the index of a derived
// position; ok is false when p is not one.
func ParseDerived(p Position) (parent Position, index int, ok bool) {
	rest, found := bytes.CutPrefix(p, []byte(DerivedMark))
	if !found {
		return nil, 0, false
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)-k) {
		return nil, 0, false
	}
	rest = rest[k:]
	parent, rest = Position(rest[:n]), rest[n:]
	i, k := binary.Uvarint(rest)
	if k <= 0 || k != len(rest) || i > uint64(^uint(0)>>1) {
		return nil, 0, false
	}
	return parent, int(i), true
}

// Origin returns the position of the record a source produced that p
// stems from: p itself, or the parent of a derived position, followed
// through every nesting.
func Origin(p Position) Position {
	for {
		parent, _, ok := ParseDerived(p)
		if !ok {
			return p
		}
		p = parent
	}
}

// Readable returns p as text for logs and messages: a derived position
// reads as its parent followed by "#" and the index ("42#0", "42#1#2"
// for a record split twice).
func Readable(p Position) string {
	parent, i, ok := ParseDerived(p)
	if !ok {
		return string(p)
	}
	return Readable(parent) + "#" + strconv.Itoa(i)
}
