#!/bin/sh
# cli_bucket.sh STRATA file|RGWENVFILE - `strata bucket` end to end: each
# verb, its output, its exit status, and a one-line error when it fails.
set -u
strata=$1
target=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-cli.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
check() { # description, then a command that must succeed
    what=$1
    shift
    if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failures=$((failures + 1)); fi
}
props=$dir/server.properties
run_id=cli-$$-$(date +%s)
{
    echo "# a broker's file: its own keys are not the object store's business"
    echo "node.id=1"
    echo "log.dirs=$dir/logs"
    if [ "$target" = file ]; then
        echo "objectstore.backend=file"
        echo "objectstore.file.root=$dir/bucket"
    else
        . "$target"
        echo "objectstore.backend=s3"
        echo "objectstore.s3.endpoint=$STRATA_RGW_ENDPOINT"
        echo "objectstore.s3.bucket=$STRATA_RGW_BUCKET"
        echo "objectstore.s3.access.key=$STRATA_RGW_ACCESS_KEY"
        echo "objectstore.s3.secret.key=$STRATA_RGW_SECRET_KEY"
        echo "objectstore.s3.prefix=$run_id/"
    fi
} >"$props"
sb() { "$strata" bucket --config "$props" "$@"; }
one_line_error() { # exit status $1 wanted; the rest is the command
    want=$1
    shift
    "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    [ "$rc" -eq "$want" ] && [ "$(wc -l <"$dir/err")" -eq 1 ] || {
        echo "      exit $rc, stderr:"
        sed 's/^/      | /' "$dir/err"
        return 1
    }
}

head -c 2345678 /dev/urandom >"$dir/data"
check "put a file" sb put topic-0/segment.log "$dir/data"
check "ls shows it with its size" sh -c "'$strata' bucket --config '$props' ls topic-0/ | grep -q '^ *2345678  .*  topic-0/segment.log\$'"
check "ls of another prefix is empty" sh -c "[ -z \"\$('$strata' bucket --config '$props' ls other/)\" ]"
check "stat shows size and CRC32C" sh -c "'$strata' bucket --config '$props' stat topic-0/segment.log | grep -q '^size: *2345678' && '$strata' bucket --config '$props' stat topic-0/segment.log | grep -q '^crc32c: *[0-9a-f]\{8\}\$'"
check "get into a file, same bytes" sh -c "'$strata' bucket --config '$props' get topic-0/segment.log '$dir/back' >/dev/null && cmp -s '$dir/data' '$dir/back'"
check "get to stdout, same bytes" sh -c "'$strata' bucket --config '$props' get topic-0/segment.log - | cmp -s '$dir/data' -"
check "get of a missing key fails in one line" one_line_error 1 sb get nope "$dir/nope"
check "... and leaves no file behind" sh -c "! ls '$dir' | grep -q nope"
check "rm" sb rm topic-0/segment.log
check "rm again fails in one line" one_line_error 1 sb rm topic-0/segment.log
check "stat of a missing key fails in one line" one_line_error 1 sb stat topic-0/segment.log
check "unknown verb is a usage error" sh -c "'$strata' bucket --config '$props' frob >/dev/null 2>&1; [ \$? -eq 2 ]"
check "a bad setting is named" sh -c "'$strata' bucket --config '$props' --override objectstore.file.threads=0 ls 2>&1 | grep -q 'objectstore.file.threads'"
check "an unknown objectstore key is refused" one_line_error 1 sb --override objectstore.no.such.key=1 ls
check "put of a missing local file fails in one line" one_line_error 1 sb put x "$dir/missing"
if [ "$target" != file ]; then
    check "wrong secret: one line that says so" one_line_error 1 sb --override objectstore.s3.secret.key=wrong ls
    check "... naming credentials" grep -q "wrong credentials" "$dir/err"
    check "... without the secret" sh -c "! grep -q '$STRATA_RGW_SECRET_KEY' '$dir/err'"
    check "missing bucket: one line that says so" one_line_error 1 sb --override objectstore.s3.bucket=no-such-bucket-$$ ls
    check "... naming the bucket" grep -q "bucket no-such-bucket-$$ does not exist" "$dir/err"
else
    check "missing bucket directory: one line" one_line_error 1 sb --override objectstore.file.root=$dir/none --override objectstore.file.create.root=false ls
    check "... that says so" grep -q "does not exist" "$dir/err"
fi
echo "cli_bucket: $failures failure(s)"
[ $failures -eq 0 ]
