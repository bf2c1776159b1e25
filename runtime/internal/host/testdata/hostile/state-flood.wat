;; state-flood: ABI v2: sets a value variable to 60 KiB over and over, for the keys that start with x
(module
  (import "groupstate" "group_begin" (func $0 (param i32)))
  (import "groupstate" "log" (func $1 (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $2 (param i32 i32 i32 i32) (result i32)))
  (import "groupstate" "state" (func $3 (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 16)
  (data (i32.const 128) "{\"ok\":true}")
  (data (i32.const 32) "\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00v\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
  (data (i32.const 4096) "\x02\x00\x00\x00\x00\x00\xf0\x00\x00")
  (data (i32.const 3072) "\x02\x00\x00\x00\x00\x01\x00\x00\x001")
  (func $4 (export "gs_abi_version") ;; gs_abi_version
    (result i32)
    i32.const 2
  )
  (func $5 (export "gs_alloc") ;; gs_alloc
    (param i32) (result i32)
    local.get 0
    i32.const 393216
    i32.gt_u
    if
      i32.const 0
      return
    end
    i32.const 131072
  )
  (func $6 (export "gs_init") ;; gs_init
    (param i32 i32) (result i64)
    i32.const 32
    i64.extend_i32_u
    i64.const 32
    i64.shl
    i32.const 29
    i64.extend_i32_u
    i64.or
  )
  (func $7 (export "gs_process") ;; gs_process
    (param i32 i32) (result i64) (local i32 i32 i32 i32 i32 i32)
    i32.const 20
    i32.const 0
    i32.store offset=0
    local.get 0
    i32.load offset=0
    local.set 2
    local.get 0
    i32.const 20
    i32.add
    local.set 3
    i32.const 524288
    i32.const 0
    i32.store offset=0
    i32.const 524288
    local.get 2
    i32.store offset=4
    i32.const 524296
    local.set 5
    i32.const 0
    local.set 4
    block
      loop
        local.get 4
        local.get 2
        i32.ge_u
        br_if 1
        i32.const 16
        local.get 4
        i32.store offset=0
        local.get 4
        call 0
        local.get 3
        i32.load offset=4
        local.set 6
        i32.const 3072
        i32.const 10
        i32.const 0
        i32.const 0
        call 3
        drop
        local.get 3
        i32.load8_u offset=9
        i32.const 120
        i32.eq
        if
          call 8
        end
        local.get 3
        i32.const 8
        i32.add
        local.get 6
        i32.add
        local.set 3
        local.get 3
        i32.load offset=0
        local.set 7
        local.get 3
        i32.const 4
        i32.add
        local.set 3
        block
          loop
            local.get 7
            i32.eqz
            br_if 1
            local.get 3
            i32.const 4
            i32.add
            local.get 3
            i32.load offset=0
            i32.add
            local.set 3
            local.get 7
            i32.const 1
            i32.sub
            local.set 7
            br 0
          end
        end
        local.get 5
        i32.const 1
        i32.store offset=0
        local.get 5
        i32.const 11
        i32.store offset=4
        local.get 5
        i32.const 8
        i32.add
        i32.const 128
        i32.const 11
        memory.copy
        local.get 5
        i32.const 19
        i32.add
        local.set 5
        local.get 5
        i32.const 0
        i32.const 12
        memory.fill
        local.get 5
        i32.const 12
        i32.add
        local.set 5
        local.get 4
        i32.const 1
        i32.add
        local.set 4
        br 0
      end
    end
    i32.const 16
    i32.const -1
    i32.store offset=0
    i32.const 20
    i32.load offset=0
    if
      i32.const 524288
      i64.extend_i32_u
      i64.const 32
      i64.shl
      i32.const 20
      i32.load offset=0
      i64.extend_i32_u
      i64.or
      return
    end
    i32.const 524288
    i64.extend_i32_u
    i64.const 32
    i64.shl
    local.get 5
    i32.const 524288
    i32.sub
    i64.extend_i32_u
    i64.or
  )
  (func $8 ;; hostile
   
    block
      loop
        i32.const 4096
        i32.const 61449
        i32.const 0
        i32.const 0
        call 3
        i32.const -1
        i32.eq
        br_if 1
        br 0
      end
    end
  )
)
