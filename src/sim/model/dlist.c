/*
 * Intrusive doubly linked list. See dlist.h.
 */
#include "sim/model/dlist.h"

#include <stddef.h>

void st_dlist_push_back(struct st_dlist *l, struct st_dlink *x)
{
    x->next = NULL;
    x->prev = l->tail;
    if (l->tail) {
        l->tail->next = x;
    } else {
        l->head = x;
    }
    l->tail = x;
    l->n++;
}

void st_dlist_push_front(struct st_dlist *l, struct st_dlink *x)
{
    x->prev = NULL;
    x->next = l->head;
    if (l->head) {
        l->head->prev = x;
    } else {
        l->tail = x;
    }
    l->head = x;
    l->n++;
}

void st_dlist_remove(struct st_dlist *l, struct st_dlink *x)
{
    if (x->prev) {
        x->prev->next = x->next;
    } else {
        l->head = x->next;
    }
    if (x->next) {
        x->next->prev = x->prev;
    } else {
        l->tail = x->prev;
    }
    x->prev = x->next = NULL;
    l->n--;
}
