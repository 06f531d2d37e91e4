package srclient

import (
	"container/list"

	"millrace/schemas/format"
)

// lru is a bounded map from schema ID to parsed schema, the least recently
// used evicted first. Its user holds the lock.
type lru struct {
	max   int
	order *list.List // of *lruEntry, most recent first
	items map[int]*list.Element
}

type lruEntry struct {
	id     int
	schema format.Schema
}

func newLRU(max int) *lru {
	return &lru{max: max, order: list.New(), items: map[int]*list.Element{}}
}

func (c *lru) get(id int) (format.Schema, bool) {
	e, ok := c.items[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry).schema, true
}

func (c *lru) put(id int, s format.Schema) {
	if e, ok := c.items[id]; ok {
		e.Value.(*lruEntry).schema = s
		c.order.MoveToFront(e)
		return
	}
	c.items[id] = c.order.PushFront(&lruEntry{id, s})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry).id)
	}
}

func (c *lru) len() int { return c.order.Len() }
