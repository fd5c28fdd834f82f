! kiln: Fortran bindings to libkiln, the client library of kilnd.
! The raw interfaces mirror include/kiln/kiln.h one to one (bind(C), same names);
! the *_f wrappers take Fortran strings and arrays. Guide: docs/fortran.md.
!
! This file is installed as source (<includedir>/kiln/kiln.f90), because .mod
! files only work with the compiler (and version) that wrote them: compile it
! with your own program and link with -lkiln. It must change whenever kiln.h
! changes a struct or a prototype.
module kiln
   use, intrinsic :: iso_c_binding, only: c_ptr, c_funptr, c_int, c_size_t, c_double, &
      c_int64_t, c_char, c_null_char, c_null_ptr, c_null_funptr, c_loc, &
      c_f_pointer, c_associated
   use, intrinsic :: iso_fortran_env, only: error_unit
   implicit none
   private

   ! Status codes, as enum kiln_status in kiln.h.
   integer(c_int), parameter, public :: KILN_OK = 0
   integer(c_int), parameter, public :: KILN_EINVAL = -1
   integer(c_int), parameter, public :: KILN_ENOMEM = -2
   integer(c_int), parameter, public :: KILN_ECONNECT = -3
   integer(c_int), parameter, public :: KILN_EPROTO = -4
   integer(c_int), parameter, public :: KILN_EIO = -5
   integer(c_int), parameter, public :: KILN_ENOTFOUND = -6
   integer(c_int), parameter, public :: KILN_EBUILD = -7
   integer(c_int), parameter, public :: KILN_ETIMEDOUT = -8
   integer(c_int), parameter, public :: KILN_ELOAD = -9
   integer(c_int), parameter, public :: KILN_EREFUSED = -10
   integer(c_int), parameter, public :: KILN_EDENIED = -11
   integer(c_int), parameter, public :: KILN_EBUSY = -12
   integer(c_int), parameter, public :: KILN_EDAEMON = -13
   integer(c_int), parameter, public :: KILN_ECUDA = -14
   integer(c_int), parameter, public :: KILN_ECLAIMED = -15
   integer(c_int), parameter, public :: KILN_EHELD = -16

   ! The structs of kiln.h, field for field. Every pointer is a type(c_ptr) to
   ! NUL-terminated characters (see kiln_c_string) that must stay alive, with
   ! the TARGET attribute, until the call that reads the struct returns.
   type, bind(C), public :: kiln_source
      type(c_ptr) :: name = c_null_ptr
      type(c_ptr) :: text = c_null_ptr
      integer(c_size_t) :: len = 0       ! 0: strlen(text)
      type(c_ptr) :: path = c_null_ptr
   end type kiln_source

   type, bind(C), public :: kiln_request
      type(c_ptr) :: toolchain = c_null_ptr  ! null: "cc"
      type(c_ptr) :: output = c_null_ptr     ! null: "shared"
      type(c_ptr) :: args = c_null_ptr       ! array of nargs type(c_ptr)
      integer(c_size_t) :: nargs = 0
      type(c_ptr) :: sources = c_null_ptr    ! array of nsources type(kiln_source)
      integer(c_size_t) :: nsources = 0
      type(c_ptr) :: alias = c_null_ptr
      type(c_ptr) :: label = c_null_ptr
      type(c_ptr) :: pch = c_null_ptr        ! array of npch type(c_ptr): headers to precompile
      integer(c_size_t) :: npch = 0
      type(c_ptr) :: host_compiler = c_null_ptr  ! nvcc's host compiler, by absolute path
   end type kiln_request

   type, bind(C), public :: kiln_options
      type(c_ptr) :: socket_path = c_null_ptr
      integer(c_int) :: autospawn = 0
      type(c_ptr) :: kilnd_path = c_null_ptr
      type(c_ptr) :: cache_dir = c_null_ptr
   end type kiln_options

   ! Fortran has no unsigned integers; the counters never reach 2**63.
   type, bind(C), public :: kiln_stats
      integer(c_int64_t) :: requests = 0
      integer(c_int64_t) :: local_hits = 0
      integer(c_int64_t) :: loads = 0
   end type kiln_stats

   ! Typed handles for the wrappers, so that a program cannot be passed where
   ! a connection is expected. %ptr is the C pointer for the raw interfaces.
   type, public :: kiln_handle
      type(c_ptr) :: ptr = c_null_ptr   ! struct kiln *
   end type kiln_handle

   type, public :: kiln_program
      type(c_ptr) :: ptr = c_null_ptr   ! struct kiln_program *, owned by its handle
   end type kiln_program

   ! One request of kiln_get_many_f, in Fortran strings: one inline source
   ! (name and text) and the optional fields of struct kiln_request; an
   ! unallocated component is left out. Arguments are added with
   ! call req%add_arg('-O3') or call req%add_args([character(len=16) :: ...]).
   type, public :: kiln_request_f
      character(len=:), allocatable :: name       ! e.g. 'stencil_4f3a.c'
      character(len=:), allocatable :: text       ! the source
      character(len=:), allocatable :: alias
      character(len=:), allocatable :: label
      character(len=:), allocatable :: toolchain  ! unallocated: 'cc'
      ! The arguments as C strings back to back. (Not an array of
      ! deferred-length strings: gfortran 12 miscompiles those as components.)
      character(len=:), allocatable, private :: argz
      integer, private :: nargs = 0
   contains
      procedure :: add_arg => request_add_arg
      procedure :: add_args => request_add_args
   end type kiln_request_f

   ! The NUL-terminated copies behind one struct kiln_request, kept alive
   ! until the C call returns.
   type :: c_request_keep
      character(kind=c_char), allocatable :: name(:), text(:), alias(:), label(:), &
         toolchain(:), argbuf(:)
      type(c_ptr), allocatable :: argv(:)
   end type c_request_keep

   ! The raw C API. Strings that C allows to be NULL are type(c_ptr), value;
   ! strings that must not be NULL are NUL-terminated character arrays.
   public :: kiln_open, kiln_open_with, kiln_close, kiln_get, kiln_get_file, kiln_get_many, &
      kiln_release, kiln_set_timeout, &
      kiln_lookup, kiln_sym, kiln_program_key, kiln_program_path, kiln_program_fd, &
      kiln_program_output, kiln_program_data, kiln_errmsg, kiln_strerror, &
      kiln_version, kiln_get_stats

   interface
      function kiln_open(socket_path, out) bind(C, name='kiln_open') result(rc)
         import :: c_ptr, c_int
         type(c_ptr), value :: socket_path
         type(c_ptr), intent(out) :: out
         integer(c_int) :: rc
      end function kiln_open

      function kiln_open_with(opts, out) bind(C, name='kiln_open_with') result(rc)
         import :: c_ptr, c_int, kiln_options
         type(kiln_options), intent(in) :: opts
         type(c_ptr), intent(out) :: out
         integer(c_int) :: rc
      end function kiln_open_with

      subroutine kiln_close(k) bind(C, name='kiln_close')
         import :: c_ptr
         type(c_ptr), value :: k
      end subroutine kiln_close

      function kiln_get(k, req, out) bind(C, name='kiln_get') result(rc)
         import :: c_ptr, c_int, kiln_request
         type(c_ptr), value :: k
         type(kiln_request), intent(in) :: req
         type(c_ptr), intent(out) :: out
         integer(c_int) :: rc
      end function kiln_get

      function kiln_release(k, p) bind(C, name='kiln_release') result(rc)
         import :: c_ptr, c_int
         type(c_ptr), value :: k, p
         integer(c_int) :: rc
      end function kiln_release

      function kiln_set_timeout(k, seconds) bind(C, name='kiln_set_timeout') result(rc)
         import :: c_ptr, c_int, c_double
         type(c_ptr), value :: k
         real(c_double), value :: seconds
         integer(c_int) :: rc
      end function kiln_set_timeout

      function kiln_get_file(k, req, out) bind(C, name='kiln_get_file') result(rc)
         import :: c_ptr, c_int, kiln_request
         type(c_ptr), value :: k
         type(kiln_request), intent(in) :: req
         type(c_ptr), intent(out) :: out
         integer(c_int) :: rc
      end function kiln_get_file

      ! status may be c_null_ptr or c_loc of an integer(c_int) array of n.
      function kiln_get_many(k, reqs, n, out, status) bind(C, name='kiln_get_many') result(rc)
         import :: c_ptr, c_int, c_size_t, kiln_request
         type(c_ptr), value :: k
         type(kiln_request), intent(in) :: reqs(*)
         integer(c_size_t), value :: n
         type(c_ptr), intent(out) :: out(*)
         type(c_ptr), value :: status
         integer(c_int) :: rc
      end function kiln_get_many

      function kiln_lookup(k, alias, out) bind(C, name='kiln_lookup') result(rc)
         import :: c_ptr, c_int, c_char
         type(c_ptr), value :: k
         character(kind=c_char), intent(in) :: alias(*)
         type(c_ptr), intent(out) :: out
         integer(c_int) :: rc
      end function kiln_lookup

      ! void *: use kiln_sym_f for a type(c_funptr).
      function kiln_sym(p, name) bind(C, name='kiln_sym') result(sym)
         import :: c_ptr, c_char
         type(c_ptr), value :: p
         character(kind=c_char), intent(in) :: name(*)
         type(c_ptr) :: sym
      end function kiln_sym

      function kiln_program_key(p) bind(C, name='kiln_program_key') result(s)
         import :: c_ptr
         type(c_ptr), value :: p
         type(c_ptr) :: s
      end function kiln_program_key

      function kiln_program_path(p) bind(C, name='kiln_program_path') result(s)
         import :: c_ptr
         type(c_ptr), value :: p
         type(c_ptr) :: s
      end function kiln_program_path

      function kiln_program_fd(p) bind(C, name='kiln_program_fd') result(fd)
         import :: c_ptr, c_int
         type(c_ptr), value :: p
         integer(c_int) :: fd
      end function kiln_program_fd

      function kiln_program_output(p) bind(C, name='kiln_program_output') result(s)
         import :: c_ptr
         type(c_ptr), value :: p
         type(c_ptr) :: s
      end function kiln_program_output

      ! size may be c_null_ptr or c_loc of an integer(c_size_t).
      function kiln_program_data(p, size) bind(C, name='kiln_program_data') result(data)
         import :: c_ptr
         type(c_ptr), value :: p
         type(c_ptr), value :: size
         type(c_ptr) :: data
      end function kiln_program_data

      function kiln_errmsg(k) bind(C, name='kiln_errmsg') result(s)
         import :: c_ptr
         type(c_ptr), value :: k
         type(c_ptr) :: s
      end function kiln_errmsg

      function kiln_strerror(code) bind(C, name='kiln_strerror') result(s)
         import :: c_ptr, c_int
         integer(c_int), value :: code
         type(c_ptr) :: s
      end function kiln_strerror

      function kiln_version() bind(C, name='kiln_version') result(s)
         import :: c_ptr
         type(c_ptr) :: s
      end function kiln_version

      subroutine kiln_get_stats(k, out) bind(C, name='kiln_get_stats')
         import :: c_ptr, kiln_stats
         type(c_ptr), value :: k
         type(kiln_stats), intent(out) :: out
      end subroutine kiln_get_stats

      pure function c_strlen(s) bind(C, name='strlen') result(n)
         import :: c_ptr, c_size_t
         type(c_ptr), value, intent(in) :: s
         integer(c_size_t) :: n
      end function c_strlen
   end interface

   ! The Fortran wrappers.
   public :: kiln_open_f, kiln_close_f, kiln_get_c_source, kiln_get_many_f, &
      kiln_lookup_f, kiln_sym_f, kiln_program_key_f, kiln_program_path_f, &
      kiln_errmsg_f, kiln_strerror_f, kiln_version_f, kiln_get_stats_f, kiln_c_string, &
      kiln_f_string

contains

   ! A NUL-terminated copy of s, for the pointers in the structs above:
   !    character(kind=c_char), allocatable, target :: alias_c(:)
   !    alias_c = kiln_c_string('gt4py:4f3a'); req%alias = c_loc(alias_c)
   ! Trailing blanks are kept; pass trim(s) to drop them.
   pure function kiln_c_string(s) result(buf)
      character(len=*), intent(in) :: s
      character(kind=c_char), allocatable :: buf(:)

      call c_copy(s, buf)
   end function kiln_c_string

   ! As kiln_c_string, into buf. The wrappers use this rather than assignment
   ! to an allocatable, on which gfortran 12's -Wuninitialized misfires.
   pure subroutine c_copy(s, buf)
      character(len=*), intent(in) :: s
      character(kind=c_char), allocatable, intent(out) :: buf(:)
      integer :: i

      allocate (buf(len(s) + 1))
      do i = 1, len(s)
         buf(i) = s(i:i)
      end do
      buf(len(s) + 1) = c_null_char
   end subroutine c_copy

   ! A copy of the NUL-terminated C string at p; '' when p is null.
   function kiln_f_string(p) result(s)
      type(c_ptr), intent(in) :: p
      character(len=:), allocatable :: s
      character(kind=c_char), pointer :: chars(:)
      integer :: i, n

      if (.not. c_associated(p)) then
         s = ''
         return
      end if
      n = int(c_strlen(p))
      call c_f_pointer(p, chars, [n])
      allocate (character(len=n) :: s)
      do i = 1, n
         s(i:i) = chars(i)
      end do
   end function kiln_f_string

   ! A copy of the calling thread's last failure text, kiln_errmsg(); handle
   ! may be absent (for kiln_open_f failures).
   function kiln_errmsg_f(handle) result(msg)
      type(kiln_handle), intent(in), optional :: handle
      character(len=:), allocatable :: msg

      if (present(handle)) then
         msg = kiln_f_string(kiln_errmsg(handle%ptr))
      else
         msg = kiln_f_string(kiln_errmsg(c_null_ptr))
      end if
   end function kiln_errmsg_f

   ! The short name of a status code, e.g. 'build failed'.
   function kiln_strerror_f(code) result(msg)
      integer(c_int), intent(in) :: code
      character(len=:), allocatable :: msg

      msg = kiln_f_string(kiln_strerror(code))
   end function kiln_strerror_f

   ! The version of the libkiln the program runs with, e.g. '0.1.0'.
   function kiln_version_f() result(v)
      character(len=:), allocatable :: v

      v = kiln_f_string(kiln_version())
   end function kiln_version_f

   ! The failure text for rc: '' for KILN_OK, else kiln_errmsg(k).
   function failure_text(k, rc) result(msg)
      type(c_ptr), intent(in) :: k
      integer(c_int), intent(in) :: rc
      character(len=:), allocatable :: msg

      if (rc == KILN_OK) then
         msg = ''
      else
         msg = kiln_f_string(kiln_errmsg(k))
      end if
   end function failure_text

   ! Ends a wrapper: hands rc to the caller's stat when present. Without stat
   ! a failure stops the program, as a failing ALLOCATE without STAT= does.
   ! (Each wrapper sets errmsg itself: gfortran 12 garbles an optional
   ! deferred-length dummy that is passed on to another optional dummy.)
   subroutine finish(k, rc, what, stat)
      type(c_ptr), intent(in) :: k
      integer(c_int), intent(in) :: rc
      character(len=*), intent(in) :: what
      integer(c_int), intent(out), optional :: stat

      if (present(stat)) then
         stat = rc
      else if (rc /= KILN_OK) then
         write (error_unit, '(a)') what//': '//kiln_strerror_f(rc)//': '// &
            kiln_f_string(kiln_errmsg(k))
         error stop 1
      end if
   end subroutine finish

   ! Connects to kilnd. socket absent: $KILN_SOCKET, else the default path.
   ! autospawn starts kilnd (kilnd_path, with --cache-dir cache_dir) when none
   ! answers. On failure handle%ptr is null.
   subroutine kiln_open_f(handle, socket, stat, errmsg, autospawn, kilnd_path, cache_dir)
      type(kiln_handle), intent(out) :: handle
      character(len=*), intent(in), optional :: socket
      integer(c_int), intent(out), optional :: stat
      character(len=:), allocatable, intent(out), optional :: errmsg
      logical, intent(in), optional :: autospawn
      character(len=*), intent(in), optional :: kilnd_path, cache_dir
      character(kind=c_char), allocatable, target :: csocket(:), ckilnd(:), ccache(:)
      type(kiln_options) :: opts
      integer(c_int) :: rc

      if (present(socket)) then
         call c_copy(trim(socket), csocket)
         opts%socket_path = c_loc(csocket)
      end if
      if (present(autospawn)) then
         if (autospawn) opts%autospawn = 1
      end if
      if (present(kilnd_path)) then
         call c_copy(trim(kilnd_path), ckilnd)
         opts%kilnd_path = c_loc(ckilnd)
      end if
      if (present(cache_dir)) then
         call c_copy(trim(cache_dir), ccache)
         opts%cache_dir = c_loc(ccache)
      end if
      rc = kiln_open_with(opts, handle%ptr)
      if (rc /= KILN_OK) handle%ptr = c_null_ptr
      if (present(errmsg)) errmsg = failure_text(c_null_ptr, rc)
      call finish(c_null_ptr, rc, 'kiln_open', stat)
   end subroutine kiln_open_f

   ! Closes the connection; the procedures already resolved stay callable,
   ! but every kiln_program of the handle becomes invalid.
   subroutine kiln_close_f(handle)
      type(kiln_handle), intent(inout) :: handle

      call kiln_close(handle%ptr)
      handle%ptr = c_null_ptr
   end subroutine kiln_close_f

   ! A compiler argument for req, trailing blanks dropped.
   subroutine request_add_arg(req, arg)
      class(kiln_request_f), intent(inout) :: req
      character(len=*), intent(in) :: arg

      if (.not. allocated(req%argz)) req%argz = ''
      req%argz = req%argz//trim(arg)//c_null_char
      req%nargs = req%nargs + 1
   end subroutine request_add_arg

   ! Compiler arguments for req, each with trailing blanks dropped.
   subroutine request_add_args(req, args)
      class(kiln_request_f), intent(inout) :: req
      character(len=*), intent(in) :: args(:)
      integer :: i

      do i = 1, size(args)
         call req%add_arg(args(i))
      end do
   end subroutine request_add_args

   ! Fills creq and src from the Fortran strings, with NUL-terminated copies
   ! in keep. keep and src must be TARGETs of the caller that stay in place
   ! until the C call has returned. argz holds nargs NUL-terminated arguments.
   subroutine marshal(keep, src, creq, name, text, argz, nargs, alias, label, toolchain)
      type(c_request_keep), intent(out), target :: keep
      type(kiln_source), intent(out), target :: src
      type(kiln_request), intent(out) :: creq
      character(len=*), intent(in) :: name, text
      character(len=*), intent(in), optional :: argz
      integer, intent(in) :: nargs
      character(len=*), intent(in), optional :: alias, label, toolchain
      integer :: i, at

      call c_copy(trim(name), keep%name)
      call c_copy(text, keep%text)
      src%name = c_loc(keep%name)
      src%text = c_loc(keep%text)
      src%len = len(text, kind=c_size_t)
      creq%sources = c_loc(src)
      creq%nsources = 1
      if (present(argz) .and. nargs > 0) then
         ! argz already is nargs C strings back to back; point at each.
         call c_copy(argz, keep%argbuf)
         allocate (keep%argv(nargs))
         at = 1
         do i = 1, nargs
            keep%argv(i) = c_loc(keep%argbuf(at))
            do while (keep%argbuf(at) /= c_null_char)
               at = at + 1
            end do
            at = at + 1
         end do
         creq%args = c_loc(keep%argv)
         creq%nargs = int(nargs, c_size_t)
      end if
      if (present(alias)) then
         call c_copy(trim(alias), keep%alias)
         creq%alias = c_loc(keep%alias)
      end if
      if (present(label)) then
         call c_copy(trim(label), keep%label)
         creq%label = c_loc(keep%label)
      end if
      if (present(toolchain)) then
         call c_copy(trim(toolchain), keep%toolchain)
         creq%toolchain = c_loc(keep%toolchain)
      end if
   end subroutine marshal

   ! Gets (builds or finds) the shared object of one inline source and loads
   ! it. name is the file name ('axpy.c'; its extension picks the language),
   ! text the whole source. args are compiler arguments, each with trailing
   ! blanks dropped; alias, label and toolchain as in struct kiln_request
   ! (toolchain absent: 'cc'; 'c++' for a .cpp). All strings are copied
   ! NUL-terminated for the duration of the call.
   subroutine kiln_get_c_source(handle, name, text, prog, args, alias, label, toolchain, &
                                stat, errmsg)
      type(kiln_handle), intent(in) :: handle
      character(len=*), intent(in) :: name, text
      type(kiln_program), intent(out) :: prog
      character(len=*), intent(in), optional :: args(:)
      character(len=*), intent(in), optional :: alias, label, toolchain
      integer(c_int), intent(out), optional :: stat
      character(len=:), allocatable, intent(out), optional :: errmsg
      type(kiln_request_f) :: fargs
      type(c_request_keep), target :: keep
      type(kiln_source), target :: src
      type(kiln_request) :: req
      integer(c_int) :: rc

      if (present(args)) call fargs%add_args(args)
      if (fargs%nargs > 0) then
         call marshal(keep, src, req, name, text, fargs%argz, fargs%nargs, alias, label, &
                      toolchain)
      else
         call marshal(keep, src, req, name, text, nargs=0, alias=alias, label=label, &
                      toolchain=toolchain)
      end if
      rc = kiln_get(handle%ptr, req, prog%ptr)
      if (rc /= KILN_OK) prog%ptr = c_null_ptr
      if (present(errmsg)) errmsg = failure_text(handle%ptr, rc)
      call finish(handle%ptr, rc, 'kiln_get', stat)
   end subroutine kiln_get_c_source

   ! Gets all requests at once (kiln_get_many): the daemon builds the missing
   ! programs in parallel instead of one after another. progs(i) receives
   ! program i (null when it failed), statuses(i) its code; both must have
   ! at least size(reqs) elements. stat is KILN_OK when all succeeded, else
   ! the code of the first failure, whose text ("request I: ...", I counted
   ! from 0) errmsg gets.
   subroutine kiln_get_many_f(handle, reqs, progs, stat, statuses, errmsg)
      type(kiln_handle), intent(in) :: handle
      type(kiln_request_f), intent(in) :: reqs(:)
      type(kiln_program), intent(out) :: progs(:)
      integer(c_int), intent(out), optional :: stat
      integer(c_int), intent(out), optional :: statuses(:)
      character(len=:), allocatable, intent(out), optional :: errmsg
      type(c_request_keep), allocatable, target :: keep(:)
      type(kiln_source), allocatable, target :: srcs(:)
      type(kiln_request), allocatable :: creqs(:)
      type(c_ptr), allocatable :: out(:)
      integer(c_int), allocatable, target :: st(:)
      integer(c_int) :: rc
      integer :: i, n

      n = size(reqs)
      if (size(progs) < n) error stop 'kiln_get_many_f: progs has fewer elements than reqs'
      if (present(statuses)) then
         if (size(statuses) < n) error stop 'kiln_get_many_f: statuses has fewer elements than reqs'
      end if
      allocate (keep(n), srcs(n), creqs(n), out(n), st(n))
      do i = 1, n
         ! An unallocated component is an absent optional argument.
         call marshal(keep(i), srcs(i), creqs(i), or_empty(reqs(i)%name), &
                      or_empty(reqs(i)%text), reqs(i)%argz, reqs(i)%nargs, reqs(i)%alias, &
                      reqs(i)%label, reqs(i)%toolchain)
      end do
      st = KILN_OK
      out = c_null_ptr
      rc = KILN_OK
      if (n > 0) rc = kiln_get_many(handle%ptr, creqs, int(n, c_size_t), out, c_loc(st))
      do i = 1, n
         progs(i)%ptr = out(i)
      end do
      if (present(statuses)) statuses(1:n) = st
      if (present(errmsg)) errmsg = failure_text(handle%ptr, rc)
      call finish(handle%ptr, rc, 'kiln_get_many', stat)
   end subroutine kiln_get_many_f

   ! s, or '' when it is not allocated.
   pure function or_empty(s) result(r)
      character(len=:), allocatable, intent(in) :: s
      character(len=:), allocatable :: r

      if (allocated(s)) then
         r = s
      else
         r = ''
      end if
   end function or_empty

   ! Finds a program by alias (in this process, then in the daemon) and loads
   ! it; never builds. A miss is KILN_ENOTFOUND.
   subroutine kiln_lookup_f(handle, alias, prog, stat, errmsg)
      type(kiln_handle), intent(in) :: handle
      character(len=*), intent(in) :: alias
      type(kiln_program), intent(out) :: prog
      integer(c_int), intent(out), optional :: stat
      character(len=:), allocatable, intent(out), optional :: errmsg
      integer(c_int) :: rc

      rc = kiln_lookup(handle%ptr, kiln_c_string(trim(alias)), prog%ptr)
      if (rc /= KILN_OK) prog%ptr = c_null_ptr
      if (present(errmsg)) errmsg = failure_text(handle%ptr, rc)
      call finish(handle%ptr, rc, 'kiln_lookup', stat)
   end subroutine kiln_lookup_f

   ! The procedure name of prog as a type(c_funptr) for c_f_procpointer;
   ! c_null_funptr when there is none (test with c_associated).
   function kiln_sym_f(prog, name) result(fn)
      type(kiln_program), intent(in) :: prog
      character(len=*), intent(in) :: name
      type(c_funptr) :: fn
      type(c_ptr) :: sym

      fn = c_null_funptr
      if (.not. c_associated(prog%ptr)) return
      sym = kiln_sym(prog%ptr, kiln_c_string(trim(name)))
      ! kiln_sym is dlsym, which returns code addresses as void *. Fortran has
      ! no conversion from c_ptr to c_funptr; POSIX guarantees that the two
      ! have one representation, so the bits are copied.
      if (c_associated(sym)) fn = transfer(sym, fn)
   end function kiln_sym_f

   ! The artifact's key, 64 hex digits.
   function kiln_program_key_f(prog) result(key)
      type(kiln_program), intent(in) :: prog
      character(len=:), allocatable :: key

      key = ''
      if (c_associated(prog%ptr)) key = kiln_f_string(kiln_program_key(prog%ptr))
   end function kiln_program_key_f

   ! The artifact's path in the cache.
   function kiln_program_path_f(prog) result(path)
      type(kiln_program), intent(in) :: prog
      character(len=:), allocatable :: path

      path = ''
      if (c_associated(prog%ptr)) path = kiln_f_string(kiln_program_path(prog%ptr))
   end function kiln_program_path_f

   ! The handle's counters (requests sent, local hits, loads).
   subroutine kiln_get_stats_f(handle, stats)
      type(kiln_handle), intent(in) :: handle
      type(kiln_stats), intent(out) :: stats

      call kiln_get_stats(handle%ptr, stats)
   end subroutine kiln_get_stats_f

end module kiln
