/*
 * The number of nodes in the job, as the batch system tells it (kilnd and
 * libkiln), and the pace of upstream polling that follows from it: the
 * nodes of one job share one metadata server, so each kilnd looks less
 * often the more nodes there are.
 */
#ifndef KILN_PROTO_JOBSIZE_H
#define KILN_PROTO_JOBSIZE_H

/* The most nodes believed: more is a typo or an attack, not a job. */
#define JOBSIZE_MAX 10000000L

/* Upstream looks per second the nodes of a job make in all by default
 * (kilnd --upstream-looks), and the most one kilnd makes however small the
 * job. A look costs the metadata server two or three requests. */
#define JOBSIZE_JOB_LOOKS_PER_S 1000.0
#define JOBSIZE_NODE_LOOKS_PER_S 20.0
/* However large the job (or a client says it is), each kilnd still looks
 * once every 10 s: waiting nodes notice a build within a bounded time. */
#define JOBSIZE_NODE_MIN_LOOKS_PER_S 0.1

/* The number of hosts in a Slurm hostlist ("nid[0001-0128,0200],login1",
 * "r[1-2]n[01-04]"); 0 when it is empty, malformed or names more than
 * JOBSIZE_MAX. */
long jobsize_hostlist_count(const char *list);

/* The job's nodes from the environment, read through get (getenv, or a
 * test's): $KILN_JOB_NODES, else $SLURM_JOB_NUM_NODES, else $SLURM_NNODES,
 * else the hosts in $SLURM_JOB_NODELIST (what a Slurm prologue has); 0 when
 * none says it. A malformed number is skipped. */
long jobsize_from_env(const char *(*get)(const char *name));

/* jobsize_from_env(getenv): this process's environment. */
long jobsize_here(void);

/* Parses a node count ("4096"): 1 to JOBSIZE_MAX, else 0. */
long jobsize_parse(const char *s);

/* Upstream looks per second for one kilnd of a job of nodes (0: unknown,
 * taken as 1) whose nodes may look job_looks times a second in all:
 * job_looks / nodes, at most JOBSIZE_NODE_LOOKS_PER_S. */
double jobsize_looks_per_s(long nodes, double job_looks);

#endif
