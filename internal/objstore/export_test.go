package objstore

// DirError is dirError, for the mapping test.
var DirError = dirError
