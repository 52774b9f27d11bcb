package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notification channels: PostgreSQL delivers a notification to every
// session listening on its channel when the transaction that sent it
// commits.
const (
	// LeasesChannel: an instance joined, left or released a lease; the
	// others look at the leases again at once.
	LeasesChannel = "conduit_leases"
	// CommandsChannel: a command waits for the instance named in the
	// payload.
	CommandsChannel = "conduit_commands"
	// PipelinesChannel: the pipelines created through the API changed;
	// every instance reads them again.
	PipelinesChannel = "conduit_pipelines"
	// RulesChannel: the managed recovery rules changed; every instance
	// reads them again.
	RulesChannel = "conduit_rules"
)

// Actions of a Command.
const (
	ActionStart     = "start"
	ActionStop      = "stop"
	ActionForceStop = "force-stop"
)

// Command is a start or stop of a pipeline asked of the instance that
// runs it, through whichever instance's API a user called.
type Command struct {
	ID         int64
	PipelineID string
	Action     string
}

// RefusedError is the answer of an instance that refused a command (the
// pipeline cannot be started or stopped from its status); Message is its
// error's.
type RefusedError struct {
	Instance, Message string
}

func (e *RefusedError) Error() string { return e.Message }

// commandPoll is how often Send looks for the answer. Commands are rare
// (a person asking); polling keeps the requester off a dedicated
// listening connection.
const commandPoll = 50 * time.Millisecond

// refusedPrefix marks, in the error column, an answer that is a refusal
// rather than a failure.
const refusedPrefix = "refused: "

// ErrOwnerChanged is returned by Send when the instance stopped holding
// the pipeline's lease (it died, was paused past its lease, or handed the
// pipeline over) before it answered: the command was withdrawn, and may
// be sent to the pipeline's new instance.
var ErrOwnerChanged = errors.New("the instance no longer runs the pipeline")

// ErrNotAnswered is returned by Send when ctx ended before the instance
// answered: the command was withdrawn, so it will not be carried out.
var ErrNotAnswered = errors.New("no answer in time; the command was withdrawn and will not be carried out")

// Send asks instance to apply action to the pipeline and waits for its
// answer: nil, a *RefusedError, or another error it failed with. When
// the instance stops holding the pipeline's lease before it answers, the
// command is withdrawn and Send returns ErrOwnerChanged; when ctx ends
// first, it is withdrawn and Send returns ErrNotAnswered - unless the
// instance took it meanwhile: then its answer is returned.
func Send(ctx context.Context, pool *pgxpool.Pool, instance, pipelineID, action string) error {
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO conduit_commands (pipeline_id, instance, action) VALUES ($1, $2, $3) RETURNING id`,
			pipelineID, instance, action).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, CommandsChannel, instance)
		return err
	})
	if err != nil {
		return wrapf(ctx, err, "asking instance %s to %s pipeline %s", instance, action, pipelineID)
	}
	// withdraw withdraws the command unless the instance answered it
	// meanwhile; then it returns the answer, and why otherwise.
	withdraw := func(why error) error {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		tag, err := pool.Exec(wctx, `UPDATE conduit_commands SET done_at = now(), error = 'withdrawn' WHERE id = $1 AND done_at IS NULL`, id)
		if err == nil && tag.RowsAffected() == 0 {
			if done, _, answer, err := commandAnswer(wctx, pool, id, instance); err == nil && done {
				return answer
			}
		}
		return why
	}
	tick := time.NewTicker(commandPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return withdraw(fmt.Errorf("instance %s: %w", instance, ErrNotAnswered))
		case <-tick.C:
		}
		done, owner, answer, err := commandAnswer(ctx, pool, id, instance)
		switch {
		case err != nil && ctx.Err() == nil:
			return wrapf(ctx, err, "waiting for instance %s", instance)
		case done:
			return answer
		case err == nil && !owner:
			return withdraw(fmt.Errorf("instance %s: %w", instance, ErrOwnerChanged))
		}
	}
}

// commandAnswer reads a command's result, and whether its instance still
// holds the pipeline's lease.
func commandAnswer(ctx context.Context, pool *pgxpool.Pool, id int64, instance string) (done, owner bool, answer, err error) {
	var doneAt *time.Time
	var msg *string
	if err := pool.QueryRow(ctx, `SELECT c.done_at, c.error, coalesce(l.owner = c.instance AND l.expires_at >= now(), false)
		FROM conduit_commands AS c LEFT JOIN conduit_leases AS l ON l.pipeline_id = c.pipeline_id WHERE c.id = $1`, id).Scan(&doneAt, &msg, &owner); err != nil {
		return false, false, nil, err
	}
	if doneAt == nil {
		return false, owner, nil, nil
	}
	// Answered: the row has served its purpose.
	_, _ = pool.Exec(ctx, `DELETE FROM conduit_commands WHERE id = $1`, id)
	switch {
	case msg == nil:
		return true, owner, nil, nil
	case len(*msg) >= len(refusedPrefix) && (*msg)[:len(refusedPrefix)] == refusedPrefix:
		return true, owner, &RefusedError{Instance: instance, Message: (*msg)[len(refusedPrefix):]}, nil
	default:
		return true, owner, fmt.Errorf("instance %s: %s", instance, *msg), nil
	}
}

// Pending returns the commands waiting for this instance, oldest first.
func (m *Membership) Pending(ctx context.Context) (_ []Command, err error) {
	defer func() { err = dbErr(ctx, err) }()
	rows, err := m.pool.Query(ctx, `SELECT id, pipeline_id, action FROM conduit_commands WHERE instance = $1 AND done_at IS NULL ORDER BY id`, m.id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Command, error) {
		var c Command
		err := row.Scan(&c.ID, &c.PipelineID, &c.Action)
		return c, err
	})
}

// PruneCommands deletes commands answered or withdrawn more than an hour
// ago: a requester deletes the answer it reads, but not one it gave up
// waiting for.
func (m *Membership) PruneCommands(ctx context.Context) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	_, err = m.pool.Exec(ctx, `DELETE FROM conduit_commands WHERE done_at < now() - interval '1 hour'`)
	return err
}

// Answer records a command's result: nil, a *RefusedError or another
// error. A command that was withdrawn meanwhile keeps its answer.
func (m *Membership) Answer(ctx context.Context, id int64, result error) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	var msg *string
	if result != nil {
		s := result.Error()
		var refused *RefusedError
		if errors.As(result, &refused) {
			s = refusedPrefix + refused.Message
		}
		msg = &s
	}
	_, err = m.pool.Exec(ctx, `UPDATE conduit_commands SET done_at = now(), error = $2 WHERE id = $1 AND done_at IS NULL`, id, msg)
	return err
}

// Notify sends a notification without payload on channel
// (PipelinesChannel, RulesChannel), to every instance this one included.
func Notify(ctx context.Context, pool *pgxpool.Pool, channel string) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	_, err = pool.Exec(ctx, `SELECT pg_notify($1, '')`, channel)
	return err
}
