/*
 * An intrusive doubly linked list with a count: the queues of the engine model (waiting and
 * running requests of a rank) and the simulator shell's parked requests and sessions. An element
 * embeds a struct st_dlink as its first member, so a link pointer converts back to the element
 * by a cast. The list owns nothing: the caller allocates and frees elements. Pure; O(1) each.
 */
#ifndef ST_SIM_MODEL_DLIST_H
#define ST_SIM_MODEL_DLIST_H

#include <stdint.h>

struct st_dlink {
    struct st_dlink *prev, *next; /* NULL at the ends, and while not on a list */
};

struct st_dlist {
    struct st_dlink *head, *tail; /* borrowed: the first and last element; NULL when empty */
    uint32_t n;                   /* elements on the list */
};

/* Appends x (not on any list) at the tail, or puts it at the head. */
void st_dlist_push_back(struct st_dlist *l, struct st_dlink *x);
void st_dlist_push_front(struct st_dlist *l, struct st_dlink *x);
/* Takes x (on l) off l and clears its links. */
void st_dlist_remove(struct st_dlist *l, struct st_dlink *x);

#endif
