// Preloaded into s3rver by scripts/servers.sh (`node -r`). s3rver's filesystem store,
// after deleting an object, removes the folders the delete left empty; a PUT into that
// folder at the same moment has just created it and then fails to open its file
// (ENOENT, an unhandled stream error), which kills the whole server. A full test run
// saw it with DynamoDB staging manifests written and deleted in one folder by 8 processes.
// Deleting here removes the object's files only; empty folders hold no objects and
// listings skip them, so what clients see is unchanged.
'use strict';
const fs = require('fs');
const path = require('path');

const bin = fs.realpathSync(process.argv[1]);
const Store = require(path.join(path.dirname(bin), '..', 'lib', 'stores', 'filesystem.js'));

Store.prototype.deleteObject = async function deleteObject(bucket, key) {
  await Promise.all(
    ['object', 'object.md5', 'metadata.json'].map(kind =>
      fs.promises.unlink(this.getResourcePath(bucket, key, kind)).catch(err => {
        if (err.code !== 'ENOENT') throw err;
      }),
    ),
  );
};
