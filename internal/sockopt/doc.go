// Package sockopt sets the socket options the client-facing servers
// (pgwire, the HTTP feed) share, on the connections they accept.
//
// TCP_NOTSENT_LOWAT (Linux) bounds how many bytes a socket holds that the
// kernel has not sent yet. Without it the kernel autotunes each socket's
// send buffer up to net.ipv4.tcp_wmem's maximum (4 MiB by default), so a
// client that stops reading pins that much kernel memory, outside the
// process's memory budget and its RSS: 500 stalled subscribers held 1.1 GB,
// and past net.ipv4.tcp_mem's pressure threshold the host's TCP shrinks
// every socket's buffers and drops and retransmits segments, for every
// client. With the mark set, a write past it waits in the process, where a
// batch's encoding is shared by all its subscribers and counted in the
// budget, and a subscriber that falls behind is detached by its queue's
// policy instead.
package sockopt

// DefaultNotSentLowWater is `shardtail serve`'s --tcp-notsent-lowat: 128
// KiB, a few of a live batch's writes, while a stalled client pins at most
// that plus its own receive window. The cost is more, smaller writes during
// a large snapshot (a wakeup per 64 KiB or so the client takes).
const DefaultNotSentLowWater = 128 << 10
