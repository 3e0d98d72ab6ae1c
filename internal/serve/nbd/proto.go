package nbd

// Protocol constants from the NBD protocol specification
// (NetworkBlockDevice/nbd doc/proto.md).

const (
	magicNBD         = 0x4e42444d41474943 // "NBDMAGIC"
	magicOpt         = 0x49484156454F5054 // "IHAVEOPT"
	magicOptReply    = 0x3e889045565a9
	magicRequest     = 0x25609513
	magicSimpleReply = 0x67446698
	magicStructReply = 0x668e33ef
)

// Handshake flags (server) and client flags.
const (
	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1

	clientFixedNewstyle = 1 << 0
	clientNoZeroes      = 1 << 1
)

// Transmission flags.
const (
	tflagHasFlags        = 1 << 0
	tflagReadOnly        = 1 << 1
	tflagSendFlush       = 1 << 2
	tflagSendFUA         = 1 << 3
	tflagRotational      = 1 << 4
	tflagSendTrim        = 1 << 5
	tflagSendWriteZeroes = 1 << 6
	tflagSendDF          = 1 << 7
	tflagCanMultiConn    = 1 << 8
)

// Options.
const (
	optExportName      = 1
	optAbort           = 2
	optList            = 3
	optPeekExport      = 4
	optStartTLS        = 5
	optInfo            = 6
	optGo              = 7
	optStructuredReply = 8
	optListMetaContext = 9
	optSetMetaContext  = 10
	optExtendedHeaders = 11
)

// Option replies.
const (
	repAck            = 1
	repServer         = 2
	repInfo           = 3
	repErrUnsup       = 1<<31 + 1
	repErrPolicy      = 1<<31 + 2
	repErrInvalid     = 1<<31 + 3
	repErrPlatform    = 1<<31 + 4
	repErrTLSReqd     = 1<<31 + 5
	repErrUnknown     = 1<<31 + 6
	repErrShutdown    = 1<<31 + 7
	repErrBlockSizeRq = 1<<31 + 8
	repErrTooBig      = 1<<31 + 9
)

// NBD_INFO types.
const (
	infoExport      = 0
	infoName        = 1
	infoDescription = 2
	infoBlockSize   = 3
)

// Commands.
const (
	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdCache       = 5
	cmdWriteZeroes = 6
	cmdBlockStatus = 7
)

// Command flags.
const (
	cmdFlagFUA      = 1 << 0
	cmdFlagNoHole   = 1 << 1
	cmdFlagDF       = 1 << 2
	cmdFlagReqOne   = 1 << 3
	cmdFlagFastZero = 1 << 4
)

// Structured reply flags and types.
const (
	replyFlagDone = 1 << 0

	replyTypeNone        = 0
	replyTypeOffsetData  = 1
	replyTypeOffsetHole  = 2
	replyTypeError       = 1<<15 + 1
	replyTypeErrorOffset = 1<<15 + 2
)

// Error values.
const (
	errPerm     = 1
	errIO       = 5
	errNoMem    = 12
	errInval    = 22
	errNoSpc    = 28
	errOverflow = 75
	errNotSup   = 95
	errShutdown = 108
)

const (
	requestSize      = 28
	optHeaderSize    = 16
	maxStringLen     = 4096    // the spec's limit for names and messages
	maxOptionLen     = 1 << 20 // longer option data is a denial of service: disconnect
	defaultMaxLength = 1 << 25 // payload every server should accept by default (32 MiB)
)
