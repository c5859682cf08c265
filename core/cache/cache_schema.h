// The cache's schema: what a usable cache file looks like, and the migrations that bring an older
// one up to kSchemaVersion. Private to the cache (not part of its API).
#pragma once

#include <optional>
#include <string>

#include "cache/sqlite_database.h"

namespace mumoe::cache {

/// Why the open database must not be used as a cache — "not a mumoe cache (…)", "corrupt: …",
/// "schema 9 is newer than 2" — or nullopt when it is a cache of this or an older schema, or a
/// brand-new empty database. Only reads. Throws SqliteError for problems that are not the file's
/// fault (I/O errors, locks), so a good cache is never set aside because of them.
std::optional<std::string> unusable_reason(const Database& db);

/// Brings the schema up to kSchemaVersion in one transaction (creating it in an empty database)
/// and returns the version it found: 0 for a new database.
int migrate(Database& db);

}  // namespace mumoe::cache
