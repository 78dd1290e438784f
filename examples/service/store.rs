//! Where the `service` example's data lives: users, who their friends are, and their posts.
//!
//! - SQLite (the default, so the example needs nothing installed): a database in a temporary
//!   file, created and seeded at start, queried on coro's blocking pool (each blocking thread
//!   keeps its own connection), since SQLite's calls block.
//! - PostgreSQL (`--postgres URL`): tokio-postgres over `coro::net::TcpStream` (coro's
//!   `tokio-io` feature), a few connections used round robin, each with its statements
//!   prepared and its protocol driven by a coro task: no tokio runtime. The tables are created
//!   and seeded if they are missing, and never dropped.
//! - Redis (`--redis URL`), optional: a cache of profiles in front of the database, through
//!   redis-rs on the tokio bridge (`coro::compat::tokio`).
//!
//! Rule: the data is the same in every store: user `i` is named `user{i}`, is friends with
//! `i+1 ..= i+3`, and has one post, `post from user{i}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Users in a seeded database; ids `1..=USERS` (and the friends of the last ones, up to
/// `USERS + 3`) exist.
pub const USERS: i64 = 10_000;

/// PostgreSQL connections of a store.
const PG_CONNECTIONS: usize = 4;

/// Which store the server reads, and whether Redis caches profiles in front of it.
#[derive(Clone, Debug, Default)]
pub struct StoreConfig {
    /// `None`: SQLite in a temporary file. `Some(url)`: PostgreSQL at `url`
    /// (`postgres://user@host:port/db`).
    pub postgres: Option<String>,
    /// A Redis URL (`redis://host:port/`) to cache profiles in.
    pub redis: Option<String>,
}

/// A store query failed (the database went away, a query was refused, ...).
#[derive(Clone, Debug)]
pub struct StoreError(String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

fn error(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError(format!("{what}: {err}"))
}

/// The database behind the service, and its optional Redis cache.
pub struct Store {
    db: Db,
    redis: Option<redis::aio::MultiplexedConnection>,
}

enum Db {
    Sqlite {
        path: PathBuf,
        /// Removed (with the database) when the store drops.
        _dir: tempfile::TempDir,
    },
    Postgres {
        connections: Vec<Pg>,
        next: AtomicUsize,
    },
}

struct Pg {
    client: tokio_postgres::Client,
    profile: tokio_postgres::Statement,
    friends: tokio_postgres::Statement,
    posts: tokio_postgres::Statement,
}

impl Store {
    /// Opens the configured store (creating and seeding a database where needed).
    pub async fn open(config: &StoreConfig) -> Result<Arc<Store>, StoreError> {
        let db = match &config.postgres {
            None => open_sqlite().await?,
            Some(url) => open_postgres(url).await?,
        };
        let redis = match &config.redis {
            None => None,
            Some(url) => Some(open_redis(url).await?),
        };
        Ok(Arc::new(Store { db, redis }))
    }

    /// What the store is, for the example's banner.
    pub fn describe(&self) -> String {
        let db = match &self.db {
            Db::Sqlite { path, .. } => format!("SQLite at {}", path.display()),
            Db::Postgres { connections, .. } => {
                format!("PostgreSQL ({} connections)", connections.len())
            }
        };
        match self.redis {
            Some(_) => format!("{db}, profiles cached in Redis"),
            None => db,
        }
    }

    /// The name of user `id`, from Redis when it has it; `None` if there is no such user.
    pub async fn profile(&self, id: i64) -> Result<Option<String>, StoreError> {
        if let Some(redis) = &self.redis {
            let mut redis = redis.clone();
            let key = format!("coro-service:profile:{id}");
            let cached: Option<String> =
                coro::compat::tokio(async { redis::AsyncCommands::get(&mut redis, &key).await })
                    .await
                    .map_err(|e| error("redis GET", e))?;
            if cached.is_some() {
                return Ok(cached);
            }
            let name = self.db_profile(id).await?;
            if let Some(name) = &name {
                let () = coro::compat::tokio(async {
                    redis::AsyncCommands::set_ex(&mut redis, &key, name, 300).await
                })
                .await
                .map_err(|e| error("redis SET", e))?;
            }
            return Ok(name);
        }
        self.db_profile(id).await
    }

    async fn db_profile(&self, id: i64) -> Result<Option<String>, StoreError> {
        match &self.db {
            Db::Sqlite { path, .. } => {
                sqlite(path, move |db| {
                    let mut query =
                        db.prepare_cached("SELECT name FROM coro_users WHERE id = ?1")?;
                    let mut rows = query.query_map([id], |row| row.get(0))?;
                    rows.next().transpose()
                })
                .await
            }
            Db::Postgres { .. } => {
                let pg = self.pg();
                let row = pg.client.query_opt(&pg.profile, &[&id]).await;
                Ok(row
                    .map_err(|e| pg_error("profile query", e))?
                    .map(|r| r.get(0)))
            }
        }
    }

    /// The friends of user `id`, in order.
    pub async fn friends(&self, id: i64) -> Result<Vec<i64>, StoreError> {
        match &self.db {
            Db::Sqlite { path, .. } => {
                sqlite(path, move |db| {
                    let mut query = db.prepare_cached(
                        "SELECT friend_id FROM coro_friends WHERE user_id = ?1 ORDER BY friend_id",
                    )?;
                    query.query_map([id], |row| row.get(0))?.collect()
                })
                .await
            }
            Db::Postgres { .. } => {
                let pg = self.pg();
                let rows = pg.client.query(&pg.friends, &[&id]).await;
                Ok(rows
                    .map_err(|e| pg_error("friends query", e))?
                    .iter()
                    .map(|r| r.get(0))
                    .collect())
            }
        }
    }

    /// The posts of these authors, by author.
    pub async fn posts(&self, authors: Vec<i64>) -> Result<Vec<String>, StoreError> {
        match &self.db {
            Db::Sqlite { path, .. } => {
                sqlite(path, move |db| {
                    // At most a few authors: one indexed lookup each.
                    let mut query = db.prepare_cached(
                        "SELECT body FROM coro_posts WHERE author_id = ?1 ORDER BY id",
                    )?;
                    let mut posts = Vec::new();
                    for author in authors {
                        for body in query.query_map([author], |row| row.get(0))? {
                            posts.push(body?);
                        }
                    }
                    Ok(posts)
                })
                .await
            }
            Db::Postgres { .. } => {
                let pg = self.pg();
                let rows = pg.client.query(&pg.posts, &[&authors]).await;
                Ok(rows
                    .map_err(|e| pg_error("posts query", e))?
                    .iter()
                    .map(|r| r.get(0))
                    .collect())
            }
        }
    }

    /// The next PostgreSQL connection, round robin.
    fn pg(&self) -> &Pg {
        match &self.db {
            Db::Postgres { connections, next } => {
                &connections[next.fetch_add(1, Relaxed) % connections.len()]
            }
            Db::Sqlite { .. } => unreachable!("pg() is only called on a PostgreSQL store"),
        }
    }
}

// ---- SQLite ----

const SQLITE_SCHEMA: &str = "
    CREATE TABLE coro_users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE coro_friends (user_id INTEGER NOT NULL, friend_id INTEGER NOT NULL,
                               PRIMARY KEY (user_id, friend_id)) WITHOUT ROWID;
    CREATE TABLE coro_posts (id INTEGER PRIMARY KEY, author_id INTEGER NOT NULL,
                             body TEXT NOT NULL);
    CREATE INDEX coro_posts_author ON coro_posts (author_id);";

/// Creates and seeds a database in a new temporary directory.
async fn open_sqlite() -> Result<Db, StoreError> {
    let dir = tempfile::tempdir().map_err(|e| error("creating a temporary directory", e))?;
    let path = dir.path().join("service.sqlite3");
    let seeded = path.clone();
    coro::spawn_blocking(move || -> rusqlite::Result<()> {
        let mut db = rusqlite::Connection::open(&seeded)?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        let seed = db.transaction()?;
        seed.execute_batch(SQLITE_SCHEMA)?;
        let sequence = "WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq \
                        WHERE i < ?1)";
        seed.execute(
            &format!("{sequence} INSERT INTO coro_users SELECT i, 'user' || i FROM seq"),
            [USERS + 3],
        )?;
        seed.execute(
            &format!(
                "{sequence} INSERT INTO coro_friends SELECT i, i + k FROM seq, \
                 (SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3)"
            ),
            [USERS],
        )?;
        seed.execute(
            &format!(
                "{sequence} INSERT INTO coro_posts (author_id, body) \
                 SELECT i, 'post from user' || i FROM seq"
            ),
            [USERS + 3],
        )?;
        seed.commit()
    })
    .await
    .map_err(|e| error("seeding SQLite", format!("{e:?}")))?
    .map_err(|e| error("seeding SQLite", e))?;
    Ok(Db::Sqlite { path, _dir: dir })
}

thread_local! {
    /// This blocking thread's connection, and the database it is open on.
    static SQLITE: std::cell::RefCell<Option<(PathBuf, rusqlite::Connection)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `query` on the blocking pool, on that thread's connection to `path`.
async fn sqlite<T: Send + 'static>(
    path: &Path,
    query: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, StoreError> {
    let path = path.to_owned();
    coro::spawn_blocking(move || {
        SQLITE.with_borrow_mut(|slot| {
            if slot.as_ref().is_none_or(|(open, _)| *open != path) {
                *slot = Some((path.clone(), rusqlite::Connection::open(&path)?));
            }
            query(&slot.as_ref().expect("opened above").1)
        })
    })
    .await
    .map_err(|e| error("SQLite query", format!("{e:?}")))?
    .map_err(|e| error("SQLite query", e))
}

// ---- PostgreSQL ----

const PG_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS coro_users (id bigint PRIMARY KEY, name text NOT NULL);
    CREATE TABLE IF NOT EXISTS coro_friends (user_id bigint NOT NULL, friend_id bigint NOT NULL,
                                             PRIMARY KEY (user_id, friend_id));
    CREATE TABLE IF NOT EXISTS coro_posts (id bigserial PRIMARY KEY, author_id bigint NOT NULL,
                                           body text NOT NULL);
    CREATE INDEX IF NOT EXISTS coro_posts_author ON coro_posts (author_id);";

async fn open_postgres(url: &str) -> Result<Db, StoreError> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| error("--postgres URL", e))?;
    let setup = connect_pg(&config).await?;
    setup
        .batch_execute(PG_SCHEMA)
        .await
        .map_err(|e| pg_error("creating the tables", e))?;
    let seeded: i64 = setup
        .query_one("SELECT count(*) FROM coro_users", &[])
        .await
        .map_err(|e| pg_error("counting users", e))?
        .get(0);
    if seeded == 0 {
        setup
            .batch_execute(&format!(
                "BEGIN;
                 INSERT INTO coro_users SELECT i, 'user' || i FROM generate_series(1, {u3}) i;
                 INSERT INTO coro_friends SELECT i, i + k FROM generate_series(1, {USERS}) i,
                                                              generate_series(1, 3) k;
                 INSERT INTO coro_posts (author_id, body)
                     SELECT i, 'post from user' || i FROM generate_series(1, {u3}) i;
                 COMMIT;",
                u3 = USERS + 3
            ))
            .await
            .map_err(|e| pg_error("seeding PostgreSQL", e))?;
    }
    let mut connections = vec![prepare_pg(setup).await?];
    while connections.len() < PG_CONNECTIONS {
        connections.push(prepare_pg(connect_pg(&config).await?).await?);
    }
    Ok(Db::Postgres {
        connections,
        next: AtomicUsize::new(0),
    })
}

/// What a PostgreSQL error says: the server's message where it sent one.
fn pg_error(what: &str, err: tokio_postgres::Error) -> StoreError {
    match err.as_db_error() {
        Some(db) => error(what, db),
        None => error(what, err),
    }
}

/// One connection over `coro::net`, its protocol driven by a coro task.
async fn connect_pg(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, StoreError> {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => {
            return Err(StoreError(
                "--postgres URL: give a TCP host (host:port)".into(),
            ));
        }
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let stream = coro::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| error(&format!("connecting to PostgreSQL at {host}:{port}"), e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| error("TCP_NODELAY", e))?;
    let (client, connection) = config
        .connect_raw(stream, tokio_postgres::NoTls)
        .await
        .map_err(|e| pg_error("PostgreSQL handshake", e))?;
    // Detached: it ends when the client drops.
    drop(coro::spawn(async move {
        if let Err(err) = connection.await {
            eprintln!("service: a PostgreSQL connection failed: {err}");
        }
    }));
    Ok(client)
}

/// `client` with the store's statements prepared.
async fn prepare_pg(client: tokio_postgres::Client) -> Result<Pg, StoreError> {
    let prepare = |sql| client.prepare(sql);
    let profile = prepare("SELECT name FROM coro_users WHERE id = $1").await;
    let friends =
        prepare("SELECT friend_id FROM coro_friends WHERE user_id = $1 ORDER BY friend_id").await;
    let posts =
        prepare("SELECT body FROM coro_posts WHERE author_id = ANY($1) ORDER BY author_id, id")
            .await;
    let prepared = |s: Result<_, _>| s.map_err(|e| pg_error("preparing a query", e));
    Ok(Pg {
        profile: prepared(profile)?,
        friends: prepared(friends)?,
        posts: prepared(posts)?,
        client,
    })
}

// ---- Redis ----

async fn open_redis(url: &str) -> Result<redis::aio::MultiplexedConnection, StoreError> {
    let client = redis::Client::open(url).map_err(|e| error("--redis URL", e))?;
    coro::compat::tokio(client.get_multiplexed_async_connection())
        .await
        .map_err(|e| error(&format!("connecting to Redis at {url}"), e))
}
