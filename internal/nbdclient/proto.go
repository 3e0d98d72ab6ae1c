package nbdclient

// Constants of the NBD protocol (NetworkBlockDevice/nbd doc/proto.md).
const (
	magicNBD         = 0x4e42444d41474943 // "NBDMAGIC"
	magicOpt         = 0x49484156454F5054 // "IHAVEOPT"
	magicOptReply    = 0x3e889045565a9
	magicRequest     = 0x25609513
	magicSimpleReply = 0x67446698
	magicStructReply = 0x668e33ef

	hflagFixedNewstyle = 1 << 0
	hflagNoZeroes      = 1 << 1

	tflagHasFlags        = 1 << 0
	tflagReadOnly        = 1 << 1
	tflagSendFlush       = 1 << 2
	tflagSendFUA         = 1 << 3
	tflagSendTrim        = 1 << 5
	tflagSendWriteZeroes = 1 << 6
	tflagCanMultiConn    = 1 << 8

	optExportName      = 1
	optAbort           = 2
	optStartTLS        = 5
	optGo              = 7
	optStructuredReply = 8

	repAck      = 1
	repInfo     = 3
	repErrUnsup = 1<<31 + 1

	infoExport    = 0
	infoBlockSize = 3

	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdWriteZeroes = 6

	cmdFlagFUA    = 1 << 0
	cmdFlagNoHole = 1 << 1

	replyFlagDone        = 1 << 0
	replyTypeNone        = 0
	replyTypeOffsetData  = 1
	replyTypeOffsetHole  = 2
	replyTypeError       = 1<<15 + 1
	replyTypeErrorOffset = 1<<15 + 2

	requestSize     = 28
	defaultMaxBlock = 32 << 20 // what every server accepts (the spec's default maximum)
	maxOptReply     = 1 << 20
)
