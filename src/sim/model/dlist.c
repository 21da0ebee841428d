/*
 * Intrusive doubly linked list. See dlist.h.
 */
#include "sim/model/dlist.h"

#include <stddef.h>

/* Puts x between prev and next (neighbours on l, or NULL at an end). */
static void link_between(struct st_dlist *l, struct st_dlink *x, struct st_dlink *prev,
                         struct st_dlink *next)
{
    x->prev = prev;
    x->next = next;
    *(prev ? &prev->next : &l->head) = x;
    *(next ? &next->prev : &l->tail) = x;
    l->n++;
}

void st_dlist_push_back(struct st_dlist *l, struct st_dlink *x)
{
    link_between(l, x, l->tail, NULL);
}

void st_dlist_push_front(struct st_dlist *l, struct st_dlink *x)
{
    link_between(l, x, NULL, l->head);
}

void st_dlist_remove(struct st_dlist *l, struct st_dlink *x)
{
    *(x->prev ? &x->prev->next : &l->head) = x->next;
    *(x->next ? &x->next->prev : &l->tail) = x->prev;
    x->prev = x->next = NULL;
    l->n--;
}
