package resp

import "strconv"

// AppendCommand appends args as a RESP multibulk request, the form clients
// send and Reader reads: a Raft follower forwarding a command to its leader
// and the benchmark load generators build their requests with it.
func AppendCommand[S string | []byte](b []byte, args ...S) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
