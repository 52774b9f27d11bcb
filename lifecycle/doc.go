// Package lifecycle is the supervisor: it keeps each pipeline in one of four
// states that tell the truth, restarts it on exponential backoff when a run
// ends with a transient error, and degrades it when the error is fatal or
// recovery takes too long.
//
//	          start                     transient error
//	stopped ─────────> running ───────────────────────> recovering ──┐ backoff elapsed: restart,
//	   ^    <───────── │   ^   <─────────────────────── │  │ ^  ^    │ on probation; transient
//	   │       stop    │   │   first record end to end  │  │ │  └────┘ error: wait longer
//	   │               │   │   or probation passed      │  │ │
//	   └───────────────┼───┼─────────── stop ───────────┘  │ │ a recovery rule applied
//	                   │   │ start                         │ │ to the degraded pipeline
//	     fatal error,  v   │                               │ │ (recovery-rules apply)
//	     force stop   degraded <───────────────────────────┘ │
//	                     └───────────────────────────────────┘
//	                 fatal error, retries exhausted, max duration, flapping, force stop
//
// Recovering has three phases, states of the machine like the statuses
// (fsm.go): waiting for the scheduled restart, held by a dependency's open
// breaker, and on probation once restarted.
//
//	running ──fault──> waiting ──restart──> probation ──record end to end──> running
//	                   │    ^                   │       or probation over
//	     breaker open: v    │ released          │ fault
//	                   held ┘                   └──────> waiting
//
// Any of them goes to degraded or stopped as recovering does. A stop or a
// force stop of a pipeline with a run goes through a phase of its own
// until the run has ended (stopped/stopping, degraded/stopping): no start
// is taken before. Every stop has a deadline (deadline.go): a drain past
// it is forced - a user's stop then moves on to degraded/stopping, as a
// force stop - and a forced run that still does not end is abandoned.
//
//	running ──stop──> stopped/stopping ──run ended, or abandoned──> stopped
//	   │                     │ deadline (a user's stop): forced
//	   │                     v
//	   └──force stop──> degraded/stopping ──run ended, or abandoned──> degraded
//
// A process that takes up a pipeline whose last runs it died in, each
// before the run proved itself, holds it degraded (crashloop.go).
//
// A crash-looping pipeline stays recovering the whole time: it goes back to
// running only when a record makes it end to end after a restart, or when
// its run has stayed up for the probation (an idle source that reconnected
// sends no record). The fail count resets on that record, or once the run
// has lasted max-retries-window: a failure in between continues the
// episode's backoff and counts against max-retries.
//
// Decide, then act, in separate places. Every decision is made by one
// step (step.go): from the pipeline's state (its machine, its persisted
// State, its run), an input (a request, a run's report, a timer, the
// breaker's answer) and a snapshot (the policy and a snapshot of its
// rules, now, a random number), it changes the state and lists the
// effects - events to record, the state to save, runs to start, stop or
// cancel, restarts to schedule, timers, the breaker, answers - which the
// supervisor's loop carries out in order (perform.go) and nothing else.
// Within the step, Decide is the pure rule of restart or degrade
// (policy.go); stepFault and faultOutcome decide a fault and work out what
// it changes (fault.go); ruleApplicationOf does the same for a managed
// rule applied to a degraded pipeline (apply.go). Policy.DeadLetterRule
// decides, with the same matcher, about a record the engine asks about
// while the run goes on (policy.go), and the dry runner replays the audit
// log's faults with it too (dryrun.go). Every step is table-tested
// (step_machine_test.go, step_test.go). One goroutine owns each
// pipeline's state; everything else sends it messages. Time comes from a
// Clock (pkg/clock), so tests never sleep.
//
// Restarts are launched by a RestartScheduler that the supervisors of a
// process share, not by each supervisor's own timer, so that ten thousand
// restarts falling due at once are still launched on time (see its doc).
// The launched run reports "restarted" to its supervisor before anything
// else.
//
// The package does not know how a pipeline moves records: it runs whatever
// a RunFactory builds, and learns about progress through RunHooks.
package lifecycle
