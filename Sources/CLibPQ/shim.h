#ifndef RECEIPTS_CLIBPQ_SHIM_H
#define RECEIPTS_CLIBPQ_SHIM_H

#include <libpq-fe.h>

#ifdef __linux__
// For `SocketPoller`, which waits on the sockets of every connection with one epoll set
// (Glibc's Swift module does not export these headers).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif

#endif
