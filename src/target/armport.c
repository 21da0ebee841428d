/*
 * Who holds an arm's port (arm_int.h, st_arm_port_probe): the TCP listeners on base_url's port
 * in /proc/net/tcp and /proc/net/tcp6, each one's owner found through its socket inode in
 * /proc/PID/fd, and whether a TCP connect to host:port succeeds. Both are asked because a bind
 * test proves nothing: llama-server binds with SO_REUSEPORT, so a second server binds the same
 * port and the kernel splits the connections between the two. A leaf: no backend, not arm.c.
 * Blocking, bounded (one connect of at most ST_ARM_PORT_CONNECT_MS, one pass over /proc).
 */
#include "target/arm_int.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#define ST_ARM_PORT_CONNECT_MS 500
#define TCP_LISTEN 0x0A /* st in /proc/net/tcp: TCP_LISTEN */

/* host (brackets of an IPv6 literal dropped) and port (the scheme's default when absent) of
 * url. Returns 0 or ST_EPARSE. */
static int url_host_port(const char *url, char *host, size_t cap, int *port)
{
    CURLU *u = curl_url();
    char *h = NULL, *p = NULL;
    int rc = ST_EPARSE;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        size_t n = strlen(h);
        const char *s = h;
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
            s = h + 1;
            n -= 2;
        }
        snprintf(host, cap, "%.*s", (int)n, s);
        *port = (int)strtol(p, NULL, 10);
        rc = *port > 0 && *port < 65536 ? 0 : ST_EPARSE;
    }
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
    return rc;
}

/* The process holding socket inode ino: its pid and command name. Returns 1 when found. */
static int inode_owner(unsigned long ino, struct st_arm_port *pt)
{
    char want[48];
    snprintf(want, sizeof(want), "socket:[%lu]", ino);
    DIR *d = opendir("/proc");
    if (!d) {
        return 0;
    }
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) {
            continue;
        }
        char path[40];
        snprintf(path, sizeof(path), "/proc/%.20s/fd", e->d_name);
        DIR *fd = opendir(path); /* another user's: not readable, the owner stays unknown */
        if (!fd) {
            continue;
        }
        struct dirent *f;
        while ((f = readdir(fd)) != NULL) {
            char link[64], to[64];
            snprintf(link, sizeof(link), "%s/%.20s", path, f->d_name);
            ssize_t n = readlink(link, to, sizeof(to) - 1);
            if (n > 0 && (size_t)n == strlen(want) && memcmp(to, want, (size_t)n) == 0) {
                found = 1;
                break;
            }
        }
        closedir(fd);
        if (found) {
            pt->pid = (int)strtol(e->d_name, NULL, 10);
        }
    }
    closedir(d);
    if (found) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/comm", pt->pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, pt->comm, sizeof(pt->comm) - 1) : 0;
        pt->comm[n > 0 ? n : 0] = '\0';
        pt->comm[strcspn(pt->comm, "\n")] = '\0';
        if (fd >= 0) {
            close(fd);
        }
    }
    return found;
}

/* Whether a listener's local address (hex from /proc/net/tcp{,6}, af) can take connections meant
 * for addr: the same address, the wildcard, or loopback for a loopback addr. */
static int addr_covers(const char *hex, int af, const struct sockaddr_storage *addr)
{
    unsigned char a[16] = {0};
    size_t n = af == AF_INET ? 4 : 16;
    if (strlen(hex) != 2 * n) {
        return 0;
    }
    /* The kernel prints each 32-bit word in host order. */
    for (size_t w = 0; w < n / 4; w++) {
        unsigned int v = 0;
        if (sscanf(hex + 8 * w, "%8x", &v) != 1) {
            return 0;
        }
        memcpy(a + 4 * w, &v, 4);
    }
    static const unsigned char zero[16] = {0};
    if (memcmp(a, zero, n) == 0) {
        return 1; /* the wildcard: every address of this host, loopback included */
    }
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    unsigned char want[16] = {0};
    size_t wn;
    int wloop;
    if (addr->ss_family == AF_INET) {
        memcpy(want, &((const struct sockaddr_in *)addr)->sin_addr, 4);
        wn = 4;
        wloop = want[0] == 127;
    } else {
        memcpy(want, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
        wn = 16;
        wloop = IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)want);
    }
    const unsigned char *a4 = af == AF_INET ? a : (memcmp(a, mapped, 12) == 0 ? a + 12 : NULL);
    int aloop = a4 ? a4[0] == 127 : IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a);
    if (wloop && aloop) {
        return 1;
    }
    if (wn == 4) {
        return a4 && memcmp(a4, want, 4) == 0;
    }
    return af == AF_INET6 && memcmp(a, want, 16) == 0;
}

/* Counts the LISTEN sockets of one /proc/net file on port that cover addr; the first one's
 * owner into pt. */
static void scan_listeners(const char *file, int af, int port, const struct sockaddr_storage *addr,
                           struct st_arm_port *pt)
{
    FILE *f = fopen(file, "re");
    if (!f) {
        return;
    }
    char line[512];
    if (!fgets(line, sizeof(line), f)) { /* the header */
        fclose(f);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        char local[64];
        unsigned int lport = 0, st = 0;
        unsigned long ino = 0;
        /* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &lport,
                   &st, &ino) != 4 ||
            st != TCP_LISTEN || (int)lport != port || !addr_covers(local, af, addr)) {
            continue;
        }
        pt->listeners++;
        if (pt->listeners == 1) {
            pt->inode = ino;
            if (!inode_owner(ino, pt)) {
                pt->pid = 0;
            }
        }
    }
    fclose(f);
}

/* A TCP connect to addr within ST_ARM_PORT_CONNECT_MS: 1 when it was accepted. */
static int connects(const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    int ok = 0;
    if (connect(fd, (const struct sockaddr *)addr, len) == 0) {
        ok = 1;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        ok = poll(&p, 1, ST_ARM_PORT_CONNECT_MS) == 1 &&
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0;
    }
    close(fd);
    return ok;
}

/* The owner's command line (NULs as blanks), cut to cap - 1 bytes. */
static void owner_cmdline(int pid, char *out, size_t cap)
{
    char path[64];
    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    n = n > 0 ? n : 0;
    out[n] = '\0';
    for (ssize_t i = 0; i < n; i++) {
        out[i] = out[i] == '\0' ? ' ' : out[i];
    }
    while (n > 0 && out[n - 1] == ' ') {
        out[--n] = '\0';
    }
}

int st_arm_port_probe(const char *base_url, struct st_arm_port *pt)
{
    memset(pt, 0, sizeof(*pt));
    if (url_host_port(base_url ? base_url : "", pt->host, sizeof(pt->host), &pt->port) != 0) {
        snprintf(pt->desc, sizeof(pt->desc), "%s: no host and port to check",
                 base_url ? base_url : "(no base_url)");
        return ST_EPARSE;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", pt->port);
    if (getaddrinfo(pt->host, ps, &hints, &res) == 0 && res) {
        struct sockaddr_storage a;
        memset(&a, 0, sizeof(a));
        memcpy(&a, res->ai_addr, res->ai_addrlen);
        scan_listeners("/proc/net/tcp", AF_INET, pt->port, &a, pt);
        scan_listeners("/proc/net/tcp6", AF_INET6, pt->port, &a, pt);
        pt->answers = connects(&a, res->ai_addrlen);
        freeaddrinfo(res);
    } else {
        snprintf(pt->desc, sizeof(pt->desc), "%s: the host does not resolve", pt->host);
        return ST_EPARSE;
    }
    if (pt->pid > 0) {
        owner_cmdline(pt->pid, pt->cmdline, sizeof(pt->cmdline));
    }
    st_arm_port_text(pt, pt->desc, sizeof(pt->desc));
    return 0;
}

void st_arm_port_text(const struct st_arm_port *pt, char *out, size_t cap)
{
    char owner[400];
    if (pt->pid > 0) {
        snprintf(owner, sizeof(owner), "pid %d (%s)%s%.200s", pt->pid, pt->comm,
                 pt->cmdline[0] ? ": " : "", pt->cmdline);
    } else if (pt->listeners) {
        snprintf(owner, sizeof(owner),
                 "unknown owner (socket inode %lu: no process of this user "
                 "holds it)",
                 pt->inode);
    } else {
        snprintf(owner, sizeof(owner), "unknown owner (no listener on this host's /proc/net/tcp)");
    }
    if (st_arm_port_taken(pt)) {
        snprintf(out, cap,
                 "%s:%d is taken by %s (%d listener%s in /proc/net/tcp{,6}; a TCP "
                 "connect %s)",
                 pt->host, pt->port, owner, pt->listeners, pt->listeners == 1 ? "" : "s",
                 pt->answers ? "succeeded" : "was refused");
    } else {
        snprintf(out, cap,
                 "%s:%d is free: no listener on port %d in /proc/net/tcp{,6} and a TCP "
                 "connect was refused",
                 pt->host, pt->port, pt->port);
    }
}

int st_arm_port_taken(const struct st_arm_port *pt)
{
    return pt->listeners > 0 || pt->answers;
}

void st_arm_jw_port(struct st_jw *w, const char *key, const struct st_arm_port *pt)
{
    st_jw_key(w, key);
    st_jw_obj_open(w);
    st_jw_kstr(w, "host", pt->host);
    st_jw_ki64(w, "port", pt->port);
    st_jw_kbool(w, "taken", st_arm_port_taken(pt));
    st_jw_ki64(w, "listeners", pt->listeners);
    st_jw_kbool(w, "answers", pt->answers);
    st_jw_key(w, "pid");
    if (pt->pid > 0) {
        st_jw_i64(w, pt->pid);
        st_jw_kstr(w, "comm", pt->comm);
        st_jw_kstr(w, "cmdline", pt->cmdline);
    } else {
        st_jw_null(w);
    }
    st_jw_kstr(w, "detail", pt->desc);
    st_jw_obj_close(w);
}
