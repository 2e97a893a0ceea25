package expr

import "errors"

func errorsIsLimit(err error) bool { return errors.Is(err, ErrLimit) }
