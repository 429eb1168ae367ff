package main

// group runs actors, each a pair of functions: execute runs until done, and
// interrupt makes it return. When the first actor returns, every actor is
// interrupted (in the order added), and run waits for all of them. It is
// the run.Group of Prometheus' main, reduced to what baton needs.
type group struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error)
}

// add adds an actor. interrupt must make execute return, and may be called
// after execute returned.
func (g *group) add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// run runs the actors and returns the error of the first one to return, and
// the errors the others returned afterwards.
func (g *group) run() (first error, rest []error) {
	if len(g.actors) == 0 {
		return nil, nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first = <-errs
	for _, a := range g.actors {
		a.interrupt(first)
	}
	for range len(g.actors) - 1 {
		if err := <-errs; err != nil {
			rest = append(rest, err)
		}
	}
	return first, rest
}
