package sim

import "slices"

// BlockSize is the number of tokens in one KV cache block, as in vLLM.
const BlockSize = 16

// kvBlock is one block of the KV cache.
type kvBlock struct {
	hash   uint64 // chained prefix hash, when cached
	ref    int32  // sequences holding the block
	cached bool   // hash is valid and the block is in kvCache.table
	// prev and next link the free cached blocks in LRU order; -1 ends.
	prev, next int32
}

// kvCache is a paged KV cache with prefix caching, after vLLM's block pool:
// full prompt blocks are keyed by a hash chained over all tokens up to and
// including the block; a freed block that holds a hash stays in the table and
// joins an LRU list of evictable blocks, so that a later request with the
// same prefix reuses it; a fresh block comes from the never-cached free list
// first, else by evicting the least recently freed cached block.
//
// Loop-only: only the scheduler goroutine touches it.
type kvCache struct {
	blocks   []kvBlock
	uncached []int32 // free blocks holding no hash (a stack)
	// lruHead is the least recently freed cached block, lruTail the most.
	lruHead, lruTail int32
	nLRU             int
	table            map[uint64]int32
	used             int // blocks with ref > 0
}

func newKVCache(nblocks int) *kvCache {
	kv := &kvCache{
		blocks:   make([]kvBlock, nblocks),
		uncached: make([]int32, nblocks),
		lruHead:  -1,
		lruTail:  -1,
		table:    make(map[uint64]int32),
	}
	for i := range kv.uncached {
		kv.uncached[i] = int32(nblocks - 1 - i) // pop from the end gives block 0 first
		kv.blocks[i].prev, kv.blocks[i].next = -1, -1
	}
	return kv
}

// free is the number of blocks that can be allocated now.
func (kv *kvCache) free() int { return len(kv.uncached) + kv.nLRU }

// total is the number of blocks.
func (kv *kvCache) total() int { return len(kv.blocks) }

// alloc takes a fresh block; the caller has checked free() > 0.
func (kv *kvCache) alloc() int32 {
	var id int32
	if n := len(kv.uncached); n > 0 {
		id = kv.uncached[n-1]
		kv.uncached = kv.uncached[:n-1]
	} else {
		id = kv.lruHead
		kv.unlink(id)
		b := &kv.blocks[id]
		delete(kv.table, b.hash)
		b.cached = false
	}
	kv.blocks[id].ref = 1
	kv.used++
	return id
}

// acquire takes one more reference on a cached block found by lookup.
func (kv *kvCache) acquire(id int32) {
	b := &kv.blocks[id]
	if b.ref == 0 {
		kv.unlink(id)
		kv.used++
	}
	b.ref++
}

// release drops one reference; a block no one holds becomes free (and stays
// findable by its hash until evicted).
func (kv *kvCache) release(id int32) {
	b := &kv.blocks[id]
	b.ref--
	if b.ref > 0 {
		return
	}
	kv.used--
	if !b.cached {
		kv.uncached = append(kv.uncached, id)
		return
	}
	b.prev, b.next = kv.lruTail, -1
	if kv.lruTail >= 0 {
		kv.blocks[kv.lruTail].next = id
	} else {
		kv.lruHead = id
	}
	kv.lruTail = id
	kv.nLRU++
}

// unlink removes a free cached block from the LRU list.
func (kv *kvCache) unlink(id int32) {
	b := &kv.blocks[id]
	if b.prev >= 0 {
		kv.blocks[b.prev].next = b.next
	} else {
		kv.lruHead = b.next
	}
	if b.next >= 0 {
		kv.blocks[b.next].prev = b.prev
	} else {
		kv.lruTail = b.prev
	}
	b.prev, b.next = -1, -1
	kv.nLRU--
}

// register records that block id holds the prefix with hash h. A hash
// already present (two identical prompts computed at once) keeps its first
// block, as vLLM does.
func (kv *kvCache) register(id int32, h uint64) {
	if _, ok := kv.table[h]; ok {
		return
	}
	b := &kv.blocks[id]
	b.hash, b.cached = h, true
	kv.table[h] = id
}

// lookup counts the leading blocks of hashes present in the cache, and of
// those, how many are free (they stop being allocatable once acquired).
func (kv *kvCache) lookup(hashes []uint64) (hits, freeHits int) {
	for _, h := range hashes {
		id, ok := kv.table[h]
		if !ok {
			break
		}
		hits++
		if kv.blocks[id].ref == 0 {
			freeHits++
		}
	}
	return hits, freeHits
}

// appendBlockHashes appends the chained hashes of the full blocks of
// tokens to dst: hash i covers tokens[0 : (i+1)*BlockSize]. The cache keeps
// the hash values, not the slice.
func appendBlockHashes(dst []uint64, tokens []int32) []uint64 {
	n := len(tokens) / BlockSize
	dst = slices.Grow(dst, n)
	h := uint64(0x6a09e667f3bcc908)
	for i := range n {
		for _, t := range tokens[i*BlockSize : (i+1)*BlockSize] {
			h = mix(h, uint64(t))
		}
		dst = append(dst, h)
	}
	return dst
}

// blocksFor is the number of blocks that hold n tokens.
func blocksFor(n int) int { return (n + BlockSize - 1) / BlockSize }
