package resp

import "bytes"

// SplitArgs splits line into arguments as Redis' sdssplitargs does for an
// inline command or a redis.conf line: blanks separate arguments, double
// quotes take C escapes (\n, \x41...), single quotes only \'. ok is false
// where Redis refuses the line: unbalanced quotes, a closing quote followed
// by something other than a blank, or a NUL byte (which would end the line
// in Redis' C string).
func SplitArgs(line string) (args []string, ok bool) {
	b := []byte(line)
	if bytes.IndexByte(b, 0) >= 0 {
		return nil, false
	}
	split, ok := rdSplitArgs(b, nil)
	if !ok {
		return nil, false
	}
	args = make([]string, len(split))
	for i, a := range split {
		args[i] = string(a)
	}
	return args, true
}
