/* SPDX-License-Identifier: MIT */
/*
 * engine_int.h - what the files of the engine thread (engine.c: the loop
 * and socket readers; engine_peers.c: sessions and membership;
 * engine_swim.c: SWIM membership; engine_round.c: rounds and matchmaking;
 * engine_data.c: the data plane; engine_resume.c: a round over a
 * connection reset; engine_state.c: serving and downloading state) share
 * with each other. Engine thread only; never included outside
 * src/net/.
 */
#ifndef MP_NET_ENGINE_INT_H
#define MP_NET_ENGINE_INT_H

#include <zmq.h>

#include "engine.h"
#include "net/round_msg.h"
#include "wire/wire_swim.h"

_Static_assert(sizeof(zmq_msg_t) <= 64, "zmq_msg_t storage in mp_peer_t");

#define GOSSIP_MS 1000u
#define HELLO_RETRY_MS 1000u
/* how long HELLOs with one older key are dropped before they count as a
 * live sender's (docs/PROTOCOL.md, "Session setup", step 3): late copies
 * come in a burst when a cut link heals, a sender repeats its HELLO every
 * HELLO_RETRY_MS for 20 s */
#define STALE_HELLO_MS 5000u
#define HELLO_TRIES_MAX 20u
#define DEAD_RETRY_MS 10000u
/* HELLOs of a peer we refused less than this ago are dropped unread */
#define REFUSE_HOLD_MS 1000u
/* Every RECONNECT_MS one peer that is dead (not one that said BYE) is
 * dialled again, so the two sides of a healed partition find each other;
 * peers dead for RECONNECT_GIVEUP_MS are left alone. */
#define RECONNECT_MS 5000u
/* A live session ends when membership holds its peer dead and nothing came
 * from it for this long after this peer probed it directly
 * (mp__engine_swim_check_sessions) */
#define SESSION_QUIET_MS 5000u
#define RECONNECT_GIVEUP_MS 3600000u
/* Over config sessions_max, a session closes only once nothing went over
 * it for this long past the matchmaking time (docs/DESIGN.md,
 * "Sessions"). */
#define SESSION_UNUSED_MS 2000u
/* matchmaker candidates of the next call's key dialled ahead (when a
 * group forms and when a call ends) */
#define SESSION_DIAL_AHEAD 2u
/* windows a call waits for its group when its matchmakers were not
 * dialled ahead (a swarm larger than sessions_max) */
#define SESSION_COLD_WINDOWS 3u
#define SESSION_COLD_MORE_MS 5000u /* but at most this much longer */
#define ROUND_MARGIN_MS 100u
/* A peer whose address our control DEALER could not reach (no CURVE
 * handshake) this long after it began dialling is told so ("nr"). */
#define REACH_WAIT_MS 1500u
/* Reachability asked again (docs/DESIGN.md, "Reachability asked again"):
 * every REACH_ASK_MS (+-20%) a peer asks up to REACH_ASK_N dialable
 * members to dial it back, and sooner on signs of change, but never twice
 * within REACH_ASK_MIN_MS; answers are awaited for REACH_ANSWER_MS. A
 * verdict that changes the mode waits for a moment without a call, at
 * most REACH_SWITCH_WAIT_MS for the mates of the last round and pending
 * JOINs. After a switch our DEALERs are read for REACH_GRACE_MS (messages
 * sent before the other side heard of it). A member dials one requester
 * back at most once per DIALBACK_PEER_MS, and DIALBACK_RATE a second in
 * all (a burst of DIALBACK_BURST). */
#define REACH_ASK_MS 15000u
#define REACH_ASK_MIN_MS 5000u
#define REACH_ASK_N 3u
#define REACH_ANSWER_MS (REACH_WAIT_MS + 2500u)
#define REACH_SWITCH_WAIT_MS 10000u
#define REACH_GRACE_MS 10000u
#define DIALBACK_PEER_MS 4000u
#define DIALBACK_RATE 4u
#define DIALBACK_BURST 16u
/* why a session with a peer ends when both sides are outbound-only */
#define MP_WHY_BOTH_OUTBOUND "outbound-only, like us"
/* poll timeout while a data frame waits for an outbound-only peer's
 * connection on our ROUTER */
#define ROUTER_RETRY_MS 2
#define POLL_MAX_MS 1000
/* a turn of the engine loop this much longer than its poll's timeout:
 * the process was stopped or the machine slept (engine.c, on_pause) */
#define MP_PAUSE_MS 250u
#define BATCH 64

/* The time now, after noting that the engine thread runs: if it did not
 * for MP_PAUSE_MS past the sleep it had announced (mp->sleep_ms), the
 * process was stopped or the machine slept, and the pause is handled
 * (engine.c, on_pause) before anything that came meanwhile is read. */
uint64_t mp__engine_awake(moshpit_t *mp);
bool mp__engine_authorized(const moshpit_t *mp, const uint8_t id[32]);
bool mp__engine_is_self(const moshpit_t *mp, const uint8_t id[32]);
mp_peer_t *mp__engine_find_peer(moshpit_t *mp, const uint8_t id[32]);
mp_peer_t *mp__engine_find_peer_by_tag(moshpit_t *mp, uint64_t tag);
uint64_t mp__engine_now_ms(void);
uint64_t mp__engine_rng_next(moshpit_t *mp);
void mp__engine_complete_cmd(moshpit_t *mp, mp_cmd_t *c, moshpit_err_t e);
void mp__engine_early_free_at(moshpit_t *mp, size_t i);
void mp__engine_on_data_msg(moshpit_t *mp, zmq_msg_t *zm);
/* Opens a single-frame data frame of the running round and hands it to the
 * group machine. */
void mp__engine_process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                              size_t len, const mp_data_hdr_t *h);
/* Whether gid is one of the last rounds this peer finished. */
bool mp__engine_recent_gid(const moshpit_t *mp, uint64_t gid);
void mp__engine_on_hello(moshpit_t *mp, mp_peer_t *p, const uint8_t id[32],
                         const mp_hello_t *h);
/* Certificate mode: refuses live peers whose certificate has expired. */
void mp__engine_expire_certs(moshpit_t *mp);
void mp__engine_peer_learn(moshpit_t *mp, const uint8_t id[32],
                           const char *addr);
void mp__engine_peer_set_state(moshpit_t *mp, mp_peer_t *p, mp_peer_state_t s,
                               const char *why);
/* Closes a peer's sockets and forgets its session (the entry stays). */
void mp__engine_peer_close(mp_peer_t *p);
/* Closes p and frees it with its secrets (teardown). */
void mp__engine_peer_free(mp_peer_t *p);
/* engine_round.c: the round machine (core/round.h) driven with the
 * engine's clock and sessions. mp__engine_round_on_msg takes a round message
 * (JOIN, JOIN_ACK, GROUP, ALONE, LEAVE) from p, false if m is none;
 * mp__engine_round_pump carries out the machine's outputs and ends a call that
 * is over; mp__engine_round_wakeup is when the machine next needs the time. */
bool mp__engine_round_on_msg(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m);
void mp__engine_round_pump(moshpit_t *mp);
uint64_t mp__engine_round_wakeup(const moshpit_t *mp);
/* When a slow member's next paced scatter part is due (UINT64_MAX: none). */
uint64_t mp__engine_pump_wakeup(const moshpit_t *mp);
void mp__engine_pump_sends(moshpit_t *mp);
void mp__engine_round_end(moshpit_t *mp, moshpit_err_t e, bool alone);
/* Every mate of the last round in a group said DONE for it or is gone. */
bool mp__engine_owed_settled(const moshpit_t *mp);
void mp__engine_round_peer_failed(moshpit_t *mp, mp_peer_t *p);
/* A DONE from p: its report of our upload rate (linkstat.h). */
void mp__engine_round_on_done(moshpit_t *mp, mp_peer_t *p, const mp_done_t *d);
/* The rate at which member p's scatter parts of round gid reached us, in
 * kbit/s (DONE "up"), 0 if unknown. */
uint32_t mp__engine_round_done_report(const moshpit_t *mp, const mp_peer_t *p,
                                      uint64_t gid);
/* p is a member of the group all-reduce running now. */
bool mp__engine_round_has_member(const moshpit_t *mp, const mp_peer_t *p);
/* p's session just came up: the running round's frames from p that
 * waited for it are processed, and parts for p go out. */
void mp__engine_round_peer_live(moshpit_t *mp, mp_peer_t *p);
/* Sessions only where needed (docs/DESIGN.md, "Sessions"). More members
 * than config sessions_max (and this peer is not outbound-only): new
 * members get no session until a message is for them. */
bool mp__engine_crowded(const moshpit_t *mp);
/* Membership told of a member: dialled while the cap allows, else a table
 * entry without a session (IDLE); a dead one is redialled. */
void mp__engine_peer_know(moshpit_t *mp, const uint8_t id[32],
                          const char *addr);
/* Crowded swarm, once a second: a peer dead here for DEAD_RETRY_MS that
 * membership holds alive (a dial that was not answered under load, a
 * session that dropped) is a member again, without a session. */
void mp__engine_sessions_revive(moshpit_t *mp, uint64_t now);
/* Whether p counts as a member: a live session, or none open (IDLE, or
 * being dialled) and membership holds it alive or suspect. */
bool mp__engine_peer_member(const moshpit_t *mp, const mp_peer_t *p);
/* Dials p if it is a member without a session (a session wanted soon). */
void mp__engine_session_want(moshpit_t *mp, mp_peer_t *p);
/* Sends m to p, dialling p first (m waits, up to MP_CTL_PENDING_MAX
 * messages) when it has no session; false if p cannot be reached. */
bool mp__engine_send_or_dial(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m);
/* Sends the messages that waited for p's session (p just went live). */
void mp__engine_ctl_flush(moshpit_t *mp, mp_peer_t *p);
/* Closes the least recently used sessions nothing needs while more than
 * config sessions_max are open. */
void mp__engine_sessions_trim(moshpit_t *mp, uint64_t now);
/* Closes p's session on purpose (a BYE marked idle first); p stays a
 * member, IDLE. */
void mp__engine_session_end_idle(moshpit_t *mp, mp_peer_t *p, const char *why);
void mp__engine_round_progress(moshpit_t *mp);
void mp__engine_send_hello(moshpit_t *mp, mp_peer_t *p, bool reply);
/* Sending to p by the route its reachability gives (docs/DESIGN.md, "Peers
 * behind NAT"): our DEALERs to it, or, for an outbound-only p, our ROUTERs
 * to its own connections. Return 0 / the bytes sent, or -1 (errno). */
bool mp__engine_can_send(const mp_peer_t *p);
bool mp__engine_has_data(const mp_peer_t *p);
int mp__engine_ctrl_send(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                         size_t len, const uint8_t *pb, size_t pblen);
int mp__engine_data_send(moshpit_t *mp, mp_peer_t *p, zmq_msg_t *zm);
/* We dialled p's advertised address REACH_WAIT_MS ago or more and neither
 * a TCP connection nor a CURVE handshake nor an answer came: it cannot be
 * dialled there (a TCP connection still in its handshake is a loaded
 * peer, not an unreachable one). Such a peer is told so and is no
 * matchmaker candidate. */
bool mp__engine_unreached(const mp_peer_t *p, uint64_t now);
/* Reachability checks of the peers that dialled us (once a second). */
void mp__engine_reach_check(moshpit_t *mp, uint64_t now);
/* Fills mp->msg with a HELLO to p (an answer if reply); false if there is
 * no ephemeral key. */
bool mp__engine_hello_fill(moshpit_t *mp, mp_peer_t *p, bool reply);
/* Turns this peer outbound-only (by: the peer whose verdict it is, or
 * NULL for a verdict of several). */
void mp__engine_go_outbound(moshpit_t *mp, const mp_peer_t *by);
/* Without 'advertise': takes the host `observed` (an "oa" of peer by) as
 * ours when it differs, with a new SWIM incarnation. true if it did. */
bool mp__engine_adopt_observed(moshpit_t *mp, const mp_peer_t *by,
                               const char *observed);
/* engine_reach.c: reachability asked again (docs/DESIGN.md, "Reachability
 * asked again"). The HELLO keys bq (a dial-back request) and ba (its
 * answer) of p's HELLO h; */
void mp__engine_reach_on_hello(moshpit_t *mp, mp_peer_t *p,
                               const mp_hello_t *h);
/* dial-backs in progress, requests, verdicts and switches (every turn of
 * the loop); */
void mp__engine_reach_tick(moshpit_t *mp, uint64_t now);
/* when it next needs to run (UINT64_MAX: nothing waits); */
uint64_t mp__engine_reach_wakeup(const moshpit_t *mp);
/* a sign that reachability may have changed: ask soon; */
void mp__engine_reach_soon(moshpit_t *mp, const char *why);
/* whether our DEALERs carry answers to read (not dialable, or a switch a
 * moment ago); */
bool mp__engine_reach_read_dealers(const moshpit_t *mp, uint64_t now);
/* p's dial-back socket goes (p's sockets close). */
void mp__engine_dialback_close(mp_peer_t *p);
/* Reads p's monitor events (engine.c). */
void mp__engine_read_monitor(moshpit_t *mp, mp_peer_t *p);
void mp__engine_send_msg(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m);
void mp__engine_send_peers(moshpit_t *mp, mp_peer_t *p, const mp_peer_t *only);
void mp__engine_send_simple(moshpit_t *mp, mp_peer_t *p, mp_msg_type_t t,
                            uint64_t seq);
void mp__engine_start_round(moshpit_t *mp, mp_cmd_t *c);
void mp__engine_stash_drop(mp_peer_t *p);
/* Closes p's shared memory regions both ways (its session ended). */
void mp__engine_shm_drop(mp_peer_t *p);
void mp__engine_update_members(moshpit_t *mp);
zmq_msg_t *mp__engine_stash_of(mp_peer_t *p);

/* engine_streams.c: the data connections. mp__engine_streams_setup
 * decides their congestion control and count from the config (EINVAL, logged,
 * for an algorithm this process cannot use) and binds the data ROUTER
 * with it; mp__engine_data_dial opens p's data DEALER to p->data_addr
 * (over the configured number of connections if p takes frames out of
 * order, its HELLO's "rw", else one), mp__engine_data_close closes it;
 * mp__engine_data_on_monitor sets the algorithm on p's new data connections;
 * mp__engine_data_on_rx_monitor reads the events of the connection an
 * outbound-only peer is answered on, where it has one of its own
 * (p->data_rx). */
moshpit_err_t mp__engine_streams_setup(moshpit_t *mp, const char *bind_ep);
bool mp__engine_data_dial(moshpit_t *mp, mp_peer_t *p, bool reorder_ok);
void mp__engine_data_close(mp_peer_t *p);
void mp__engine_data_on_monitor(moshpit_t *mp, mp_peer_t *p);
void mp__engine_data_on_rx_monitor(moshpit_t *mp, mp_peer_t *p);
/* The same without acting on breaks: adds how many connections broke to
 * *breaks (the caller passes them to mp__engine_resume_data_down once a
 * round's group is set up: group_formed). */
void mp__engine_data_read_monitor(moshpit_t *mp, mp_peer_t *p,
                                  uint32_t *breaks);
/* At a round's start: starts BBR afresh on those of p's data connections
 * whose bandwidth estimate fell below half of their best, so that a model
 * left by the last round's lossy tail does not pace this one
 * (docs/DESIGN.md, "Data connections"). Adds the connections whose
 * estimate it read to *seen; returns how many it restarted. */
uint32_t mp__engine_data_cc_restart(moshpit_t *mp, mp_peer_t *p,
                                    uint32_t *seen);
/* At a round's start, with data_streams 0 and a loss-based congestion
 * control: opens more data connections to p (up to
 * MP_DATA_STREAMS_LOSSY) when what its connections report says they are
 * held by loss (mp__link_streams_for_loss). Returns how many it added. */
uint32_t mp__engine_data_widen(moshpit_t *mp, mp_peer_t *p);

/* engine_swim.c: membership */
moshpit_err_t mp__engine_swim_setup(moshpit_t *mp);
void mp__engine_swim_teardown(moshpit_t *mp);
/* SWIM holds id alive or suspect (or has not heard of it yet). */
bool mp__engine_swim_member_ok(const moshpit_t *mp, const uint8_t id[32]);
void mp__engine_swim_pump(moshpit_t *mp);
/* SWIM knows id and holds it alive or suspect. */
bool mp__engine_swim_alive(const moshpit_t *mp, const uint8_t id[32]);
/* The members this peer counts, itself included: the live sessions
 * membership does not hold dead, and for an outbound-only peer also the
 * members membership holds alive that it cannot reach (outbound-only
 * peers behind other NATs). */
size_t mp__engine_view_count(const moshpit_t *mp);
/* A control message that is not one of wire.h's: true if it was a SWIM
 * message (processed when p has a session). */
bool mp__engine_swim_on_ctrl(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                             size_t len);
void mp__engine_swim_peer_live(moshpit_t *mp, mp_peer_t *p);
/* Piggybacking: membership updates ride on round traffic (JOIN, JOIN_ACK,
 * GROUP, ALONE) to a live peer as a second frame, a GOSSIP block of at
 * most MP_PB_FRAME_MAX bytes. mp__engine_swim_piggyback encodes the updates due
 * for p into buf and returns the length (0: none); mp__engine_swim_on_piggyback
 * takes such a frame from p (anything but a GOSSIP block is dropped and
 * logged). */
#define MP_PB_UPDATE_BYTES 1024u
#define MP_PB_FRAME_MAX (MP_PB_UPDATE_BYTES + MP_SWIM_BLOCK_OVERHEAD)
size_t mp__engine_swim_piggyback(moshpit_t *mp, const mp_peer_t *p,
                                 uint8_t *buf, size_t cap);
void mp__engine_swim_on_piggyback(moshpit_t *mp, mp_peer_t *p,
                                  const uint8_t *buf, size_t len);
void mp__engine_swim_housekeeping(moshpit_t *mp, uint64_t now);
uint64_t mp__engine_swim_wakeup(const moshpit_t *mp);
void mp__engine_swim_close(moshpit_t *mp);
/* Checks the live sessions against membership's verdicts, once a second:
 * probes the peers it doubts, and ends the sessions that only the TCP
 * connections still keep up (see engine_swim.c). */
void mp__engine_swim_check_sessions(moshpit_t *mp, uint64_t now);
/* Dials a known peer again at once (membership says it is back). */
void mp__engine_peer_redial(moshpit_t *mp, mp_peer_t *p, const char *addr);
/* The incarnation membership holds for id (0: none known). */
uint32_t mp__engine_swim_inc(const moshpit_t *mp, const uint8_t id[32]);
/* Once a second: dials the members we gave up dialling whose record
 * renewed since (mp__engine_renew_due), whatever event brought it. */
void mp__engine_swim_renewed(moshpit_t *mp);

/* engine_resume.c: a round survives a connection reset (docs/DESIGN.md,
 * "On a lossy network"). mp__engine_resume_on_have takes a mate's HAVE
 * (what it holds from us) and queues what it lacks again;
 * mp__engine_resume_send_haves tells the mates that went quiet what this
 * peer holds from them; mp__engine_resume_settled is true once this peer,
 * whose group machine is done, may end its call: it says DONE to its mates
 * (once) and waits for theirs, at most MP_RESUME_WAIT_TIMEOUTS times
 * peer_timeout_ms from its DONE or from the last HAVE of a mate not yet
 * DONE, whichever is later; mp__engine_resume_wakeup is when that wait
 * ends. */
#define MP_RESUME_WAIT_TIMEOUTS 2u
/* engine_data.c calls these: a frame from round member `from` (p) was
 * accepted with counter; a MARK frame of the running round arrived from p
 * (checked here); a MARK is due to member i, sealed into p's stash (true)
 * or not (false). engine_streams.c calls mp__engine_resume_data_down when
 * a data connection to p broke (a MARK to it, if it is a round's member). */
void mp__engine_resume_accepted(moshpit_t *mp, const mp_peer_t *p,
                                uint32_t from, uint64_t counter);
/* A connection to p broke (control or data): if p is a member of the
 * round, it gets its own measured limit once more as patience
 * (mp__group_on_break) and the round its measured span again. */
void mp__engine_resume_link_broke(moshpit_t *mp, const mp_peer_t *p);
void mp__engine_resume_data_down(moshpit_t *mp, mp_peer_t *p);
/* We are outbound-only and the connection p answers us on (p->data_rx)
 * broke: what p sent on it is lost, and p never sees the break; ask p
 * now what it handed out (a HAVE, rx 0). */
void mp__engine_resume_rx_down(moshpit_t *mp, mp_peer_t *p);
void mp__engine_resume_on_mark(moshpit_t *mp, mp_peer_t *p, uint32_t from,
                               const uint8_t *buf, size_t len,
                               const mp_data_hdr_t *h);
bool mp__engine_resume_mark(moshpit_t *mp, mp_peer_t *p, uint32_t i);
void mp__engine_resume_on_have(moshpit_t *mp, mp_peer_t *p, const mp_have_t *h);
void mp__engine_resume_send_haves(moshpit_t *mp, uint64_t now);
bool mp__engine_resume_settled(moshpit_t *mp, uint64_t now);
uint64_t mp__engine_resume_wakeup(const moshpit_t *mp);

/* engine_state.c: serving and downloading state */
void mp__engine_state_round_done(moshpit_t *mp, uint64_t gid, const float *v,
                                 size_t count);
void mp__engine_state_on_req(moshpit_t *mp, mp_peer_t *p,
                             const mp_state_req_t *q);
void mp__engine_state_on_info(moshpit_t *mp, mp_peer_t *p,
                              const mp_state_info_t *i);
void mp__engine_state_on_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                               size_t len, const mp_data_hdr_t *h);
void mp__engine_state_fetch_start(moshpit_t *mp, mp_cmd_t *c);
void mp__engine_state_fetch_poll(moshpit_t *mp, uint64_t now);
uint64_t mp__engine_state_fetch_wakeup(const moshpit_t *mp);
void mp__engine_state_peer_failed(moshpit_t *mp, mp_peer_t *p);
void mp__engine_state_teardown(moshpit_t *mp);
/* Sends owed state chunks while the peers' data sockets take them. */
void mp__engine_state_pump(moshpit_t *mp);

#endif
