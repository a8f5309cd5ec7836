package server

// A ConfigError is a start refused for its settings, or for a data folder
// that belongs to another mode: starting again with the same settings
// fails the same way, so a supervisor that restarts on failure should not
// (cmd/throttled exits with a status of its own for it). Its text is the
// refusal's own.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

// refused marks err, when not nil, as a ConfigError.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{Err: err}
}
