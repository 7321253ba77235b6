package route

import (
	"sync"
	"time"
)

// maxBlocks bounds the prompt blocks hashed per request: with 64-token
// blocks the first 32,768 tokens decide the route (a longer common prefix
// changes no decision), and the hashes fit in a stack array.
const maxBlocks = 512

// hashBlocks appends the chained hash of each whole block of bs tokens of
// prompt to dst: entry i hashes prompt[:(i+1)*bs], so equal entries mean
// equal prefixes (up to a 64-bit collision). The chain starts from salt
// (vLLM's cache_salt, "" for none), as vLLM's block hashes do: prompts
// with different salts share no block. Four independent lanes per block
// keep the multiplier busy (about 1 ns per token).
func hashBlocks(dst []uint64, prompt []int32, bs int, salt string) []uint64 {
	const (
		m1 = 0x9E3779B97F4A7C15
		m2 = 0xC2B2AE3D27D4EB4F
		m3 = 0x165667B19E3779F9
		m4 = 0xD6E8FEB86659FD93
	)
	h := uint64(0x243F6A8885A308D3)
	if salt != "" {
		// FNV-1a over the salt, mixed into the seed.
		f := uint64(0xCBF29CE484222325)
		for i := 0; i < len(salt); i++ {
			f = (f ^ uint64(salt[i])) * 0x100000001B3
		}
		h = mix(h ^ f)
	}
	for len(prompt) >= bs && len(dst) < cap(dst) {
		b := prompt[:bs]
		prompt = prompt[bs:]
		a1, a2, a3, a4 := h^m1, h^m2, h^m3, h^m4
		i := 0
		for ; i+4 <= len(b); i += 4 {
			a1 = (a1 ^ uint64(uint32(b[i]))) * m1
			a2 = (a2 ^ uint64(uint32(b[i+1]))) * m2
			a3 = (a3 ^ uint64(uint32(b[i+2]))) * m3
			a4 = (a4 ^ uint64(uint32(b[i+3]))) * m4
		}
		for ; i < len(b); i++ {
			a1 = (a1 ^ uint64(uint32(b[i]))) * m1
		}
		h = mix(a1 ^ rotl(a2, 17) ^ rotl(a3, 31) ^ rotl(a4, 47))
		dst = append(dst, h)
	}
	return dst
}

func rotl(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// prefixCache is one worker's approximate record of the prompt prefixes
// Vajra sent it, as block hashes in a fixed-size LRU aged out after ttl:
// an estimate of what the worker's KV cache still holds. Memory is fixed
// at capacity entries (about 40 bytes each plus the map's).
//
// Blocks are touched deepest first, so a prefix's shallower blocks are
// never older than its deeper ones: presence along one prompt's hashes is
// monotone (a run of hits then misses), which match binary-searches.
// Safe for concurrent use (one mutex, held for a lookup or an insert).
type prefixCache struct {
	mu   sync.Mutex
	idx  map[uint64]int32
	ents []entry
	head int32 // most recent, -1 when empty
	tail int32 // least recent
	ttl  int64 // ns, 0: no ageing
}

type entry struct {
	key        uint64
	stamp      int64 // last touched, Unix ns
	prev, next int32
}

func newPrefixCache(capacity int, ttl time.Duration) *prefixCache {
	return &prefixCache{
		idx:  make(map[uint64]int32, capacity),
		ents: make([]entry, 0, capacity),
		head: -1, tail: -1,
		ttl: int64(ttl),
	}
}

// match is the number of leading hashes the cache holds, fresh at now.
func (c *prefixCache) match(hs []uint64, now int64) int {
	if len(hs) == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.has(hs[0], now) {
		return 0
	}
	// Invariant: hs[:lo] held, hs[hi:] not.
	lo, hi := 1, len(hs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.has(hs[mid], now) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (c *prefixCache) has(h uint64, now int64) bool {
	i, ok := c.idx[h]
	return ok && (c.ttl == 0 || now-c.ents[i].stamp <= c.ttl)
}

// insert records hs as sent at now, evicting the least recent (and the
// stale) entries when full.
func (c *prefixCache) insert(hs []uint64, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ttl > 0 {
		for c.tail >= 0 && now-c.ents[c.tail].stamp > c.ttl {
			c.evict()
		}
	}
	for j := len(hs) - 1; j >= 0; j-- {
		h := hs[j]
		if i, ok := c.idx[h]; ok {
			c.ents[i].stamp = now
			c.toFront(i)
			continue
		}
		var i int32
		if len(c.ents) < cap(c.ents) {
			i = int32(len(c.ents))
			c.ents = append(c.ents, entry{})
		} else {
			i = c.tail
			c.unlink(i)
			delete(c.idx, c.ents[i].key)
		}
		c.ents[i] = entry{key: h, stamp: now, prev: -1, next: -1}
		c.idx[h] = i
		c.pushFront(i)
	}
}

// evict drops the least recent entry and moves the last slot into its
// place, so that the slots in use stay ents[:len(ents)].
func (c *prefixCache) evict() {
	i := c.tail
	c.unlink(i)
	delete(c.idx, c.ents[i].key)
	last := int32(len(c.ents) - 1)
	if i != last {
		// Move the last slot into i.
		e := c.ents[last]
		c.ents[i] = e
		c.idx[e.key] = i
		if e.prev >= 0 {
			c.ents[e.prev].next = i
		} else {
			c.head = i
		}
		if e.next >= 0 {
			c.ents[e.next].prev = i
		} else {
			c.tail = i
		}
	}
	c.ents = c.ents[:last]
}

func (c *prefixCache) unlink(i int32) {
	e := &c.ents[i]
	if e.prev >= 0 {
		c.ents[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.ents[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (c *prefixCache) pushFront(i int32) {
	e := &c.ents[i]
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.ents[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *prefixCache) toFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

// size is the number of blocks held (stale ones included until evicted).
func (c *prefixCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ents)
}
